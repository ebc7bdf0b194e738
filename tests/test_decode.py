"""The two-launch decode kernels (cuda/csrc/gemm_decode.cu, plan.DecodeParams): their shared memory as the
kernel states it, the variants it refuses to compile; on a Hopper GPU (marker gpu) every variant against the
exact oracle, mt tokens a CTA, split over a cluster, the weight through shared memory or not. Their special
values: tests/test_small.py (with the other small-M kernels)."""
import dataclasses
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from mxfp4 import plan
from mxfp4.bench.shapes import shape_set
from mxfp4.cuda import jit

from .cases import kernel_meets_the_contract, large_m_operands


DECODE = [plan.DecodeParams(1, 4, 4, 8, 3), plan.DecodeParams(2, 2, 4, 16, 3), plan.DecodeParams(4, 4, 2, 8, 12),
          plan.DecodeParams(8, 2, 4, 8, 2), plan.DecodeParams(4, 16, 1, 8, 1),
          plan.DecodeParams(2, 2, 4, 16, 3, smem_weight=True), plan.DecodeParams(1, 8, 2, 8, 5, smem_weight=True)]


@pytest.mark.slow  # 10-25 s on 2 cores: one NVRTC compile (PTX only) a build
def test_shared_memory_is_the_kernels():
    """The kernel exports its shared memory for every K range a CTA may hold (Smem{nb}.bytes() for nb
    blocks, up to the most that fit 227 KiB): the host's size is that entry for every variant (the
    shipped decode variants, the GPU tests') at every nb, and at the shipped shapes, where a CTA holds
    ceil(K/32 / split) blocks."""
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    tiles = sorted({p for p in shipped if isinstance(p, plan.DecodeParams)} | set(DECODE), key=str)
    assert {p.mt for p in tiles} == {1, 2, 4, 8} and {p.smem_weight for p in tiles} == {False, True}
    builds = sorted({tuple(sorted(p.defines().items())) for p in tiles})
    with ProcessPoolExecutor(os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
        found = pool.map(jit.exported_table, ["gemm_decode.cu"] * len(builds), [dict(d) for d in builds],
                         ["mxfp4_decode_smem_bytes"] * len(builds))
        tables = dict(zip(builds, found))
    for p in tiles:
        p.check()
        table, one = tables[tuple(sorted(p.defines().items()))], dataclasses.replace(p, split=1)
        assert [one.smem_bytes(32 * nb) for nb in range(1, len(table))] == table[1:], p
        assert table[-1] <= plan.SMEM_LIMIT < one.smem_bytes(32 * len(table)), p
    for m, n, k in [(s.m, s.n, s.k) for s in shape_set("all")]:
        p = plan.choose(plan.Problem(m, n, k), plan.load_table())
        if isinstance(p, plan.DecodeParams):
            assert p.smem_bytes(k) == tables[tuple(sorted(p.defines().items()))][-(-(k // 32) // p.split)], (p, k)


def test_impossible_variants_do_not_compile():
    """What DecodeParams.check refuses, the kernels refuse to compile, naming the same rule."""
    for bad, rule in [(dict(MT=3), "MT must be 1, 2, 4 or 8"), (dict(G=16, KW=4), "G \\* KW must be 1..32 warps"),
                      (dict(DEPTH=17), "DEPTH must be in 1..16"), (dict(MT=8, G=32, KW=1), "exceeds the 227 KiB")]:
        defines = {**dict(MT=1, G=4, KW=4, DEPTH=8), **bad}
        with pytest.raises(jit.CompileError, match=rule):
            jit.compile_cubin("gemm_decode.cu", defines)
        assert not plan.valid(plan.DecodeParams(defines["MT"], defines["G"], defines["KW"], defines["DEPTH"]))


@pytest.mark.gpu
@pytest.mark.parametrize("params", DECODE,
                         ids=lambda p: f"mt{p.mt}g{p.g}kw{p.kw}d{p.depth}s{p.split}{'w' if p.smem_weight else ''}")
@pytest.mark.parametrize("m, n, k, kind", [(1, 2112, 2880, "randn"), (7, 160, 768, "spread"), (16, 2112, 2880, "mixed"),
                                           (32, 80, 640, "randn"), (5, 4096, 7168, "mixed"), (64, 48, 1024, "randn"),
                                           (3, 16, 64, "randn")])
def test_decode_kernels_meet_the_contract(params, m, n, k, kind):
    if not params.fits(plan.Problem(m, n, k)):
        pytest.skip(f"{params} does not take {m}x{n}x{k}")
    a, w = large_m_operands(m, n, k, kind)
    # the first 7 rows of "mixed" are spread too: at M <= 7 every row is (wide-range data, 98% is the bar)
    kernel_meets_the_contract(a, w, params, 0.999 if kind == "randn" or (kind == "mixed" and m > 7) else 0.98)
