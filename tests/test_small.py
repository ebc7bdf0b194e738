"""The short-K kernel (cuda/csrc/gemm_small.cu, plan.SmallParams: one launch, A quantized once a cluster,
K <= 512): its shared memory as the kernel states it, the variants it refuses to compile, its fold
bound's byte test emulated on the CPU; on a Hopper GPU (marker gpu) every variant
against the exact oracle, M in tiles of tokens, the unfolded path, and the small-M kernels' special
values (these variants with the decode kernels')."""
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch

import mxfp4
from mxfp4 import plan
from mxfp4.bench.shapes import shape_set
from mxfp4.cuda import jit

from .cases import kernel_meets_the_contract, large_m_operands, variants_meet_special_values
from .test_decode import DECODE


def small_variants():
    """The shipped variants, the GPU tests' and one whose K parts' totals follow the mbarriers."""
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    return sorted({p for p in shipped if isinstance(p, plan.SmallParams)} | set(SMALL + TILED)
                  | {plan.SmallParams(2, 8, 1, 16, 2)}, key=str)


@pytest.mark.slow  # 10-25 s on 2 cores: one NVRTC compile (PTX only) a build
def test_shared_memory_is_the_kernels():
    """The host's size of every variant is the one the kernel exports (Smem::BYTES): the K parts' totals
    in A's bytes or after the mbarriers, one or two 32-row scale units, tiles of 8 to 64 tokens."""
    variants = small_variants()
    assert {p.mt for p in variants} >= {1, 2, 4, 8} and {p.wg % 2 for p in variants} == {0, 1}
    assert {(p.kw - 1) * p.wg * p.mt * 512 > p.kb * p.tokens * 32 for p in variants} == {False, True}
    for p in variants:
        p.check()
    with ProcessPoolExecutor(os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
        found = list(pool.map(jit.exported_constant, [p.source for p in variants], [p.defines() for p in variants],
                              ["mxfp4_small_smem_bytes"] * len(variants)))
    assert [(p, p.smem_bytes()) for p in variants] == list(zip(variants, found))


def test_impossible_variants_do_not_compile():
    """What SmallParams.check refuses, the kernel refuses to compile, naming the same rule."""
    base = dict(WG=2, KW=4, MT=4, KB=16, CL=8)
    for bad, rule in [(dict(MT=9), "MT must be in 1..8"), (dict(KB=18), "KB must be a positive multiple of KW"),
                      (dict(CL=3), "CL must be 1, 2, 4 or 8"), (dict(KB=256), "at most 32 blocks a warp"),
                      (dict(WG=8, KW=4), "WG \\* KW must be 1..16 warps"),
                      (dict(MT=1, KB=2, KW=2), "whole warps over the cluster"),
                      (dict(WG=1, KW=16, KB=224), "exceeds the 227 KiB")]:
        with pytest.raises(jit.CompileError, match=rule):
            jit.compile_cubin("gemm_small.cu", {**base, **bad})
        params = plan.SmallParams(**{**dict(wg=2, kw=4, mt=4, kb=16, cluster=8), **{k.lower().replace("cl", "cluster"): v
                                                                                      for k, v in bad.items()}})
        assert not plan.valid(params), params


def test_short_k_fold_bound_every_byte():
    """gemm_small.cu tests four scale bytes at once for one above 232 (the fold's bound):
    ((x & 0x7f7f7f7f) + 0x17171717) & x & 0x80808080; every byte value in every position, beside
    neighbours of every value, without carries between bytes."""
    import numpy as np

    b = np.arange(256, dtype=np.uint64)
    for pos in range(4):
        for other in (0, 0x7f, 0x80, 0xe8, 0xe9, 0xff):
            fill = sum(other << (8 * q) for q in range(4) if q != pos)
            x = (b << np.uint64(8 * pos)) | np.uint64(fill)
            hit = (((x & 0x7F7F7F7F) + 0x17171717) & x & 0x80808080) != 0
            assert (hit == ((b > 232) | (other > 232))).all(), (pos, other)


# ---- on a Hopper GPU ----------------------------------------------------------------------------

SMALL = [plan.SmallParams(2, 4, 1, 16, 2), plan.SmallParams(2, 4, 4, 16, 8), plan.SmallParams(4, 2, 4, 16, 8),
         plan.SmallParams(1, 8, 2, 16, 1), plan.SmallParams(2, 4, 4, 20, 4), plan.SmallParams(2, 2, 1, 2, 2),
         plan.SmallParams(2, 4, 3, 24, 1), plan.SmallParams(2, 8, 1, 128, 8), plan.SmallParams(2, 8, 2, 48, 8),
         plan.SmallParams(4, 3, 4, 72, 8), plan.SmallParams(2, 6, 2, 90, 4), plan.SmallParams(2, 8, 4, 128, 8)]


@pytest.mark.gpu
@pytest.mark.parametrize("params", SMALL, ids=lambda p: f"wg{p.wg}kw{p.kw}mt{p.mt}kb{p.kb}c{p.cluster}")
@pytest.mark.parametrize("m, n, kind", [(1, 2880, "randn"), (4, 2880, "mixed"), (7, 160, "spread"), (16, 4096, "mixed"),
                                        (32, 2880, "randn"), (24, 80, "spread"), (32, 16, "randn")])
def test_short_k_kernel_meets_the_contract(params, m, n, kind):
    k = 32 * params.kb
    if not params.fits(plan.Problem(m, n, k)):
        pytest.skip(f"{params} does not take {m}x{n}x{k}")
    a, w = large_m_operands(m, n, k, kind)
    kernel_meets_the_contract(a, w, params, 0.999 if kind == "randn" or (kind == "mixed" and m > 7) else 0.98, repeats=2)


TILED = [plan.SmallParams(4, 3, 4, 48, 8), plan.SmallParams(4, 4, 4, 16, 2), plan.SmallParams(8, 2, 8, 48, 8),
         plan.SmallParams(2, 4, 8, 16, 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("params", TILED, ids=lambda p: f"wg{p.wg}kw{p.kw}mt{p.mt}kb{p.kb}c{p.cluster}")
@pytest.mark.parametrize("m, n, kind", [(33, 2112, "randn"), (64, 3072, "mixed"), (100, 320, "spread"),
                                        (333, 160, "randn"), (7, 208, "mixed")])
def test_short_k_kernel_tiles_of_tokens(params, m, n, kind):
    """M in tiles of 8 mt tokens along the grid's y (a partial last tile, CTAs past N, one tile below
    it): the contract holds, the same bits call after call."""
    a, w = large_m_operands(m, n, 32 * params.kb, kind)
    kernel_meets_the_contract(a, w, params, 0.999 if kind == "randn" or (kind == "mixed" and m > 7) else 0.98, repeats=2)


@pytest.mark.gpu
@pytest.mark.parametrize("params", [plan.SmallParams(2, 4, 1, 16, 2), plan.SmallParams(2, 4, 4, 16, 8)],
                         ids=["mt1c2", "mt4c8"])
def test_short_k_kernel_unfolded_path(params):
    """Weight scale bytes above 232 (rows times 2**110) and 255 (a NaN block) send the CTAs holding them
    down the short-K kernel's unfolded path (the fold of the weight's half-scale needs a normal float
    start), while the other CTAs of the launch fold: the contract holds in both, NaN where the exact
    product has it."""
    m, n, k = params.tokens, 256, 32 * params.kb
    g = torch.Generator().manual_seed(5)
    a = (torch.randn(m, k, generator=g) * 2.0 ** -20).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g)
    b[:16] *= 2.0 ** 110  # CTA 0's rows (two 16-row groups a CTA)
    b[40, 70] = float("nan")  # a block of CTA 1
    w = mxfp4.prepare(mxfp4.quantize(b.to(torch.bfloat16)))
    scales = w.scales.flatten()
    assert 232 < int(scales[scales != 255].max()) and (scales == 255).any()
    kernel_meets_the_contract(a, w, params, 0.999, repeats=1)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["wide", "special"])
def test_small_m_variants_on_special_values(kind):
    variants_meet_special_values(kind, 7, DECODE + SMALL)
