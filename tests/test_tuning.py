"""The tuned table (look-up, files, shipped-table handling) and the tuner's validation."""
import json
import warnings

import pytest
import torch

import mxfp4
from mxfp4 import KernelConfig, ops, reference, task, tuning
from mxfp4.tuner import candidate_configs, tune
from mxfp4.tuning import TableCache, TunedTable, choose_config, heuristic_config, load_table

CFG_A = KernelConfig(16, 128, 4)
CFG_B = KernelConfig(64, 256, 2, 8)


def table(gpu="NVIDIA H200", triton="3.6.0"):
    return TunedTable(gpu, triton, "0.1.0", (((16, 2112, 7168), CFG_A), ((256, 2112, 7168), CFG_B)))


def test_lookup_exact_then_bucket_then_none():
    t = table()
    assert t.lookup(16, 2112, 7168) == CFG_A
    assert t.lookup(8, 2112, 7168) == CFG_A       # the nearest tuned M by ratio, within 2x
    assert t.lookup(32, 2112, 7168) == CFG_A
    assert t.lookup(128, 2112, 7168) == CFG_B
    assert t.lookup(512, 2112, 7168) == CFG_B
    assert t.lookup(64, 2112, 7168) is None       # 4x from both
    tie = TunedTable("g", "t", "p", (((16, 64, 64), CFG_A), ((64, 64, 64), CFG_B)))
    assert tie.lookup(32, 64, 64) == CFG_B        # 2x from both: the larger M
    assert t.lookup(4, 2112, 7168) is None        # more than 2x from every tuned M: the heuristic
    assert t.lookup(1024, 2112, 7168) is None
    assert choose_config(4, 2112, 7168, t) == heuristic_config(4, 2112, 7168)
    assert t.lookup(16, 3072, 1536) is None
    assert choose_config(16, 3072, 1536, t) == heuristic_config(16, 3072, 1536)


def test_save_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "sub" / "t.json"
    table().save(path)
    assert load_table(path) == table()
    assert [p.name for p in path.parent.iterdir()] == ["t.json"]  # no temporary left behind


@pytest.mark.parametrize("text", ["{not json", json.dumps({"format": 99, "entries": []}),
                                  json.dumps({"format": 1, "gpu": "x", "triton": "3.6.0", "package": "0",
                                              "entries": [{"m": 1, "n": 16, "k": 64, "config": {"block_m": 24}}]})])
def test_corrupt_tables_are_rejected(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        load_table(path)


def _cache_with(monkeypatch, tmp_path, content: str | None):
    (tmp_path / "configs").mkdir()
    if content is not None:
        (tmp_path / "configs" / "h200.json").write_text(content)
    monkeypatch.setattr(tuning, "__file__", str(tmp_path / "tuning.py"))
    return TableCache()


def test_shipped_table_is_used_when_it_matches(monkeypatch, tmp_path):
    cache = _cache_with(monkeypatch, tmp_path, json.dumps(table().to_json()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.for_device("NVIDIA H200", "3.6.0") == table()


@pytest.mark.parametrize("content, gpu, why", [
    ("{corrupt", "NVIDIA H200", "cannot read"),
    (None, "NVIDIA H200", "cannot read"),
    (json.dumps(table(gpu="NVIDIA H100 80GB HBM3").to_json()), "NVIDIA H200", "is for"),
    (json.dumps(table(triton="3.4.0").to_json()), "NVIDIA H200", "tuned with triton"),
])
def test_bad_or_foreign_table_is_ignored_with_one_warning(monkeypatch, tmp_path, content, gpu, why):
    cache = _cache_with(monkeypatch, tmp_path, content)
    with pytest.warns(UserWarning, match=why):
        assert cache.for_device(gpu, "3.6.0") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second look-up is silent
        assert cache.for_device(gpu, "3.6.0") is None


def test_shipped_h200_table_is_valid_and_covers_the_benchmark_shapes():
    from pathlib import Path

    t = load_table(Path(mxfp4.__file__).parent / "configs" / "h200.json")
    assert t.gpu == "NVIDIA H200"
    for m, n, k, _ in task.BENCHMARK_SHAPES:
        assert t.lookup(m, n, k) is not None


def test_ignored_table_still_gives_correct_results(monkeypatch, tmp_path):
    """A corrupt table falls back to heuristic configs; the result is still the exact product."""
    cache = _cache_with(monkeypatch, tmp_path, "{corrupt")
    with pytest.warns(UserWarning):
        cfg = choose_config(7, 48, 128, cache.for_device("NVIDIA H200", "3.6.0"))
    g = torch.Generator().manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU runs the kernel under the interpreter
    a = torch.randn(7, 128, generator=g).to(torch.bfloat16).to(dev)
    w = mxfp4.quantize(torch.randn(48, 128, generator=g).to(torch.bfloat16).to(dev))
    out, _ = ops.gemm_a4w4_debug(a, w, cfg)
    assert torch.equal(out, reference.gemm_a4w4(a, w))


def test_tuner_never_picks_a_fast_wrong_candidate():
    """Inject a candidate that is the fastest but computes a wrong result: it must be rejected."""
    wrong = KernelConfig(16, 16, 1, num_warps=1)
    right = [KernelConfig(16, 16, 1), KernelConfig(16, 32, 2)]
    last = [None]

    def run(a, w, cfg, out):
        last[0] = cfg
        out.copy_(reference.gemm_a4w4(a, w))
        if cfg == wrong:
            out[0, 0] += 1.0  # one wrong element
        return out

    def time_us(fn):
        fn()
        return 1.0 if last[0] == wrong else 5.0  # the wrong one would be the fastest

    tbl, trials = tune([(7, 48, 128)], device="cpu", candidates=lambda m, n, k: [wrong, *right],
                       run=run, time_us=time_us, progress=False, gpu="cpu", triton_version="3.6.0")
    assert tbl.lookup(7, 48, 128) in right
    rejected = [t for t in trials if not t.passed]
    assert [t.config for t in rejected] == [wrong] and "exactness" in rejected[0].note


def test_two_launch_configs_win_only_by_the_margin():
    from mxfp4.tuner import TWO_LAUNCH_MARGIN, Trial, best_configs

    one, two = KernelConfig(64, 128, 1, 4, 4, 8, "int8_meet"), KernelConfig(64, 128, 1, 4, 4, 8, "int8")
    near = 10.0 / (1 + TWO_LAUNCH_MARGIN / 2)  # faster, but by less than the margin
    far = 10.0 / (1 + 2 * TWO_LAUNCH_MARGIN)
    trials = [Trial(64, 256, 512, one, 10.0, True), Trial(64, 256, 512, two, near, True),
              Trial(64, 512, 512, one, 10.0, True), Trial(64, 512, 512, two, far, True),
              Trial(64, 768, 512, one, 1.0, False), Trial(64, 768, 512, two, 10.0, True)]
    assert best_configs(trials) == {(64, 256, 512): one, (64, 512, 512): two, (64, 768, 512): two}


def test_candidates_are_valid_and_bounded():
    """At most 72 candidates per shape (the tuner times every one of them: ~15 s a shape on the
    H200; 64 until the one-step w_tma twins of the thirteenth session, 66 on 16x2112x7168)."""
    for m, n, k, _ in task.BENCHMARK_SHAPES:
        cands = candidate_configs(m, n, k)
        assert 1 <= len(cands) <= 72
        assert all(isinstance(c, KernelConfig) for c in cands)


def test_every_shape_gets_candidates():
    """Tiny, task, model-layer and prefill shapes all get at least one candidate (the heuristic
    config when the curated sets do not fit), and every candidate is a valid config."""
    from mxfp4.tuner import candidate_configs

    for shape in [(1, 16, 64), (7, 48, 320), (4, 2880, 512), (16, 2112, 7168), (256, 3072, 1536),
                  (8192, 8192, 8192)]:
        cands = candidate_configs(*shape)
        assert cands and all(isinstance(c, KernelConfig) for c in cands), shape


def test_tables_written_with_the_removed_scale_mma_option_still_load():
    old = KernelConfig(16, 64).to_dict() | {"scale_mma": False}
    assert KernelConfig.from_dict(old) == KernelConfig(16, 64)
    with pytest.raises(ValueError, match="unknown KernelConfig fields"):
        KernelConfig.from_dict(old | {"scale_mma": True})  # the tf32 scale dot no longer exists


def test_fused_step_sizes():
    from mxfp4.tuning import fused_step

    assert fused_step(16, 1, 16) == (16, 16)   # K = 512 in one step
    assert fused_step(224, 7, 16) == (8, 32)   # 7168 in 7 splits of 4 steps of 8 blocks
    assert fused_step(224, 12, 16) == (4, 20)  # 8-block steps make only 10 splits; 4-block ones 12
    assert fused_step(16, 3, 64) is None       # 64 rows: steps of 4 blocks at most, 2 segments only


def test_fused_steps_offer_short_steps_for_16_block_segments():
    from mxfp4.tuner import fused_candidates
    from mxfp4.tuning import fused_steps

    assert fused_steps(224, 14, 16) == [(16, 16), (4, 16)]  # 14 segments: one step of 16, or four of 4
    assert fused_steps(224, 7, 16) == [(8, 32)]
    assert fused_steps(16, 3, 64) == []
    cands = fused_candidates(16, 2112, 7168)
    assert KernelConfig(16, 128, 14, 8, 3, 4, "int8_fused") in cands  # the H200 winner of the eleventh session
    assert KernelConfig(16, 128, 14, 8, 1, 16, "int8_fused") in cands


def test_fused_candidates_offer_the_weight_through_tma_where_a_thread_copies_much():
    from mxfp4.tuner import ONE_STEP_TMA_BYTES, TMA_BYTES, fused_candidates

    cands = fused_candidates(8, 5760, 2880)
    assert KernelConfig(16, 128, 4, 4, 3, 8, "int8_fused", w_tma=True) in cands  # the H200 winner, twelfth session
    tma = [c for c in cands if c.w_tma]
    assert tma and all(c.num_stages > 1 and c.block_n * c.blocks_per_step // c.num_warps >= TMA_BYTES for c in tma)
    # one K step: a twin in 2 stages where a thread copies at least ONE_STEP_TMA_BYTES
    one = [c for c in fused_candidates(32, 4096, 512) if c.w_tma]
    assert KernelConfig(8, 128, 1, 4, 2, 16, "int8_fused", w_tma=True) in one  # the H200 winner, thirteenth session
    assert all(c.num_stages == 2 and c.block_n * c.blocks_per_step // c.num_warps >= ONE_STEP_TMA_BYTES for c in one)
    assert not any(c.w_tma for c in fused_candidates(4, 2880, 512))  # its one-step tiles copy < 512 bytes a thread
    assert not any(c.w_tma for c in fused_candidates(64, 7168, 2048))  # past M = 32: int8_meet's range


def test_meet_candidates_up_to_m_1024():
    from mxfp4.tuner import meet_candidates

    assert meet_candidates(32, 2880, 512) == []  # int8_fused's range
    wide = meet_candidates(256, 2880, 512)
    assert wide and all(c.kernel == "int8_meet" and c.block_m == 64 for c in wide)
    few = meet_candidates(1024, 2880, 512)
    assert KernelConfig(64, 64, 1, 4, 3, 8, "int8_meet") in few and len(few) == 3
    assert meet_candidates(1025, 2880, 512) == [] and meet_candidates(512, 2880, 64) == []
