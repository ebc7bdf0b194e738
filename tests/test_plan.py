"""mxfp4.plan: every heuristic and table entry is a valid launch; the table loads."""
import json

import pytest

from mxfp4 import plan
from mxfp4.bench.shapes import shape_set


@pytest.mark.parametrize("name", ["bench", "test", "deepseek", "gptoss", "large"])
def test_heuristic_is_valid_everywhere(name):
    for s in shape_set(name):
        p = plan.heuristic(plan.Problem(s.m, s.n, s.k))
        p.check()
        assert p.fits(plan.Problem(s.m, s.n, s.k))
        assert isinstance(p, plan.StreamParams) == (s.k > plan.SMALL_MAX_K and s.m <= plan.STREAM_MAX_M)
        assert isinstance(p, plan.WgmmaParams) == (s.m > plan.STREAM_MAX_M)


@pytest.mark.parametrize("m", [1, 7, 8, 9, 16, 17, 32])
@pytest.mark.parametrize("n, k", [(16, 64), (80, 640), (2112, 7168), (24576, 1536), (2880, 131072)])
def test_heuristic_fits_any_small_m_shape(m, n, k):
    p = plan.heuristic(plan.Problem(m, n, k))
    p.check()
    assert p.fits(plan.Problem(m, n, k))
    if isinstance(p, (plan.StreamParams, plan.BandParams)):  # any K: A streams through the ring with the weight
        assert p.tokens == next(t for t in (8, 16, 32) if t >= m) and p.smem_bytes() <= plan.SMEM_LIMIT
    else:
        assert k <= plan.SMALL_MAX_K


def test_table_loads_and_wins_for_its_shapes():
    table = plan.load_table()
    assert table, "the shipped table is empty"
    for (m, n, k), p in table.items():
        assert plan.choose(plan.Problem(m, n, k), table) == p


def test_bad_params_are_explained():
    with pytest.raises(ValueError, match="cluster must be 1, 2, 4 or 8"):
        plan.SmallParams(cluster=3).check()
    with pytest.raises(ValueError, match="mt must be 1, 2, 4 or 8"):
        plan.DecodeParams(mt=3).check()
    with pytest.raises(ValueError, match="split must be in 1..16"):
        plan.DecodeParams(split=17).check()


def test_short_k_kernel_params():
    """The short-K kernel takes exactly K = 32 kb and any M, in tiles of 8 mt rows along the grid's y
    (at most 65535 of them); its rules name the argument."""
    p = plan.SmallParams(2, 4, 4, 16, 8)
    p.check()
    assert p.threads == 256 and p.tokens == 32 and p.grid(2880) == 96  # 90 CTAs rounded up to clusters of 8
    assert p.fits(plan.Problem(32, 2880, 512)) and p.fits(plan.Problem(25, 16, 512))
    assert p.fits(plan.Problem(33, 2880, 512)) and not p.fits(plan.Problem(32, 2880, 1024))
    assert [p.m_tiles(m) for m in (1, 32, 33, 64, 100, 333)] == [1, 1, 2, 2, 4, 11]
    assert p.fits(plan.Problem(32 * 65535, 16, 512)) and not p.fits(plan.Problem(32 * 65535 + 1, 16, 512))
    plan.SmallParams(8, 2, 8, 48, 8).check()  # 64 rows a CTA: 98 KB of A, 96 KB of weight
    # smem_bytes: tests/test_small.py checks it against the kernel's own size for every variant
    for bad, rule in [(dict(mt=9), "mt must be in 1..8"), (dict(kb=18), "kb must be a positive multiple of kw"),
                      (dict(cluster=3), "cluster must be 1, 2, 4 or 8"), (dict(kb=256), "at most 32 blocks a warp"),
                      (dict(wg=8, kw=4), "wg \\* kw must be 1..16 warps"),
                      (dict(mt=1, kb=2, kw=2, cluster=8), "whole warps over the cluster")]:
        with pytest.raises(ValueError, match=rule):
            plan.SmallParams(**{**dict(wg=2, kw=4, mt=4, kb=16, cluster=8), **bad}).check()


def test_short_k_heuristic_and_table():
    """Up to K = 512 and 32 rows a shape without an entry takes the short-K kernel; the table's K = 512
    entries name it."""
    assert plan.heuristic(plan.Problem(7, 128, 64)) == plan.SmallParams(2, 2, 1, 2, 2)
    assert plan.heuristic(plan.Problem(24, 1024, 256)) == plan.SmallParams(2, 4, 3, 8, 8)
    assert plan.heuristic(plan.Problem(1, 4096, 512)) == plan.SmallParams(2, 4, 1, 16, 2)
    assert not isinstance(plan.heuristic(plan.Problem(32, 512, 1024)), plan.SmallParams)  # K above 512
    table = plan.load_table()
    for m, n in [(1, 4096), (4, 2880), (8, 4096), (16, 4096), (32, 2880), (32, 4096)]:
        assert isinstance(table[(m, n, 512)], plan.SmallParams)
        assert plan.kernel_name(table[(m, n, 512)]) == "small"
    from mxfp4 import tune
    cands = tune.small_candidates(plan.Problem(32, 2880, 512))
    assert cands and all(c.fits(plan.Problem(32, 2880, 512)) for c in cands)
    assert {c.cluster for c in cands} == {1, 2, 4, 8}
    assert tune.small_candidates(plan.Problem(65, 2880, 512)) == tune.small_candidates(plan.Problem(8, 64, 16384)) == []
    tiled = tune.small_candidates(plan.Problem(64, 3072, 1536))  # from 33 rows: tiles of 32 or 64 tokens
    assert {c.mt for c in tiled} == {4, 8} and {c.cluster for c in tiled} == {2, 4, 8}
    assert table[(64, 3072, 1536)] in tiled and table[(64, 3072, 1536)] in tune.candidates(plan.Problem(64, 3072, 1536))
    assert all(c.kb // c.kw <= 24 for c in tune.small_candidates(plan.Problem(1, 2880, 4096)))
    kws = {(c.wg, c.kw) for c in tune.small_candidates(plan.Problem(16, 2880, 2880))}  # 90 blocks
    assert kws == {(1, 5), (1, 6), (1, 9), (1, 10), (1, 15), (2, 5), (2, 6)}
    big = plan.SmallParams(2, 8, 4, 128, 8)  # A's whole K at 32 rows: 147 KB, dynamic shared memory
    assert plan.valid(big)
    assert not plan.valid(plan.SmallParams(1, 16, 4, 224, 8))  # 32 rows at K = 7168: 258 KB


def _table_file(d, entries):
    (d / "t.json").write_text(json.dumps({"entries": entries}))
    return d / "t.json"


def test_table_entries_name_their_kernel(tmp_path):
    path = _table_file(tmp_path, [{"m": 4, "n": 2880, "k": 512, "kernel": "stream", "params": {"g": 8, "ks": 32, "stages": 2}},
                                  {"m": 8, "n": 4608, "k": 7168, "kernel": "decode",
                                   "params": {"mt": 1, "g": 4, "kw": 4, "depth": 8, "split": 3}}])
    table = plan.load_table(path)
    assert table[(4, 2880, 512)] == plan.StreamParams(1, 8, 2, 32, 2)
    assert table[(8, 4608, 7168)] == plan.DecodeParams(1, 4, 4, 8, 3)
    assert plan.choose(plan.Problem(8, 4608, 7168), table) == plan.DecodeParams(1, 4, 4, 8, 3)
    with pytest.raises(ValueError, match="kernel must be one of"):
        plan.load_table(_table_file(tmp_path, [{"m": 1, "n": 32, "k": 64, "kernel": "nosuch", "params": {}}]))
    with pytest.raises(ValueError, match="kernel must be one of"):  # every entry names its kernel
        plan.load_table(_table_file(tmp_path, [{"m": 1, "n": 32, "k": 64, "params": {}}]))


def test_missing_table_is_empty(tmp_path):
    assert plan.load_table(tmp_path / "none.json") == {}
    (tmp_path / "t.json").write_text(json.dumps({"entries": [{"m": 1, "n": 32, "k": 64, "params": {"bn": 48}}]}))
    with pytest.raises(ValueError):
        plan.load_table(tmp_path / "t.json")


def test_tuner_times_the_large_m_splits_from_33_rows():
    from mxfp4 import tune
    p = plan.Problem(64, 2880, 4096)  # 23 weight tiles of 128 rows
    wg = [c for c in tune.candidates(p) if isinstance(c, plan.WgmmaParams)]
    assert wg[0] == plan.wgmma_params(p) == plan.WgmmaParams(64, 3, split=4)
    assert sorted(c.split for c in wg) == [1, 2, 3, 4]  # 8 x 23 CTAs would exceed the 132 SMs
    for c in wg:
        c.check()
        assert c.fits(p)
    assert [c.split for c in tune.candidates(plan.Problem(64, 7168, 512)) if isinstance(c, plan.WgmmaParams)] == [2, 1]


def test_large_m_split_heuristic():
    """Clusters of 2, 4 or 8 while the grid stays within the SMs, at most one CTA a segment; the int8
    weight from 513 rows, and no split there."""
    cases = {(64, 7168, 2048): 2, (64, 2880, 4096): 4, (64, 2112, 7168): 4, (64, 24576, 1536): 1, (256, 3072, 1536): 1,
             (33, 4096, 512): 2, (64, 128, 256): 1}
    for (m, n, k), split in cases.items():
        assert plan.wgmma_params(plan.Problem(m, n, k)).split == split, (m, n, k)
    assert plan.wgmma_params(plan.Problem(512, 7168, 2048)) == plan.WgmmaParams(128, 4)  # 224 CTAs of 128 tokens
    assert plan.wgmma_params(plan.Problem(513, 128, 8192)) == plan.WgmmaParams(128, 3, True)
    with pytest.raises(ValueError, match="split needs the converting GEMM"):
        plan.WgmmaParams(128, 3, True, split=2).check()
    for bad, rule in ((plan.WgmmaParams(96, 4), "tn must be 64 or 128"), (plan.WgmmaParams(64, 1), "stages must be at least 2"),
                      (plan.WgmmaParams(128, 3), "the ring of codes must hold"), (plan.WgmmaParams(64, 4), "shared memory"),
                      (plan.WgmmaParams(64, 4, True), "int8_weight needs tn 128")):
        with pytest.raises(ValueError, match=rule):
            bad.check()
    assert not plan.WgmmaParams(64, 3, split=4).fits(plan.Problem(64, 128, 512))  # 2 segments
