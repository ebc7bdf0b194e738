"""The large-M kernels (cuda/csrc/gemm_wgmma.cu, plan.WgmmaParams, M >= 33): their shared memory and
workspace as the kernels state them; their integer and float tricks emulated exactly on the CPU (the
packed int8 shift, the biased accumulator start, the converter's codes and multipliers); on a Hopper GPU (marker gpu) every variant against the exact oracle on data that
takes each of its paths, the K split over a cluster, special values and prefill sizes."""
import pytest
import torch

import mxfp4
from mxfp4 import plan, task, testing
from mxfp4.bench.data import shuffled_weight, task_data
from mxfp4.bench.shapes import shape_set
from mxfp4.cuda import jit
from mxfp4.cuda import ops as cuda_ops
from mxfp4.cuda.launch import wgmma
from mxfp4.formats import E2M1_VALUES
from mxfp4.tensor import Layout, MXFP4Tensor

from .cases import (fuzz_case_failures, kernel_meets_the_contract, large_m_operands, same_bits,
                    variants_meet_special_values)


# ---- the sizes the kernels define ----------------------------------------------------------------

@pytest.mark.slow  # 6-11 s on 2 cores: one NVRTC compile (PTX only) a build
def test_shared_memory_and_workspace_are_the_kernels():
    """Every shipped large-M variant's (and the GPU tests') sizes on the host are the ones its module
    exports: the GEMM's dynamic shared memory (its Smem::BYTES) and threads, the blobs of the workspace
    (ABlob, WBlob), the prep's threads and the segment."""
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    variants = {p for p in shipped + LARGE_M if isinstance(p, plan.WgmmaParams)}
    builds = {tuple(sorted(p.defines().items())): p for p in variants}  # split is a launch choice
    assert {(p.tn, p.int8_weight, p.out_f32) for p in builds.values()} >= {(64, False, False), (128, False, False),
                                                                            (128, True, False), (64, False, True)}
    grouped = [p for p in shipped if isinstance(p, plan.GroupedWgmmaParams)]
    assert grouped
    for p, defines in [(p, p.defines()) for p in builds.values()] + [(g.tile, g.defines()) for g in grouped]:
        p.check()
        assert jit.exported_constants(p.source, defines) == {
            "mxfp4_wgmma_smem_bytes": p.smem_bytes(), "mxfp4_wgmma_threads": p.threads,
            "mxfp4_wgmma_ablob_bytes": p.ablob_bytes, "mxfp4_wgmma_wblob_bytes": p.wblob_bytes,
            "mxfp4_wgmma_prep_threads": wgmma.PREP_THREADS, "mxfp4_wgmma_segment_blocks": plan.SEGMENT_BLOCKS}, p


def test_peak_shared_memory_is_the_kernels():
    """The int8 wgmma peak's launch (cuda.ops.int8_wgmma_tops) gives the dynamic shared memory it needs."""
    assert jit.exported_constants("wgmma_peak.cu", None) == {"mxfp4_wgmma_peak_smem_bytes": cuda_ops.PEAK_SMEM}


def test_impossible_variants_do_not_compile():
    """A variant WgmmaParams.check refuses is a compile error of the kernel too (static_assert): none
    builds an empty or an overflowing GEMM."""
    for p, error in ((plan.WgmmaParams(128, 3), "the ring of codes must hold the output tile"),
                     (plan.WgmmaParams(64, 3, True), "mxfp4_gemm_i8 takes 128 tokens"),
                     (plan.WgmmaParams(64, 4), "exceeds the 227 KiB"),
                     (plan.WgmmaParams(128, 4, True), "exceeds the 227 KiB")):
        assert not plan.valid(p), p
        with pytest.raises(jit.CompileError, match=error):
            jit.compile_cubin(p.source, p.defines())
    with pytest.raises(jit.CompileError, match="TN, STAGES and INT8_WEIGHT are set by the JIT"):
        jit.compile_cubin("gemm_wgmma.cu", dict(TN=64, STAGES=3))
    with pytest.raises(jit.CompileError, match="GROUPED runs the converting GEMM"):
        jit.compile_cubin("gemm_wgmma.cu", dict(TN=128, STAGES=3, INT8_WEIGHT=1, GROUPED=1))


def test_grouped_variants_refuse_what_the_grouped_kernels_lack():
    """GroupedWgmmaParams takes the converting GEMM whole: no int8 weight (it would be every expert's),
    no K split; its grid bounds the chunks without the offsets and its workspace is a blob a chunk and
    segment."""
    for tile, rule in ((plan.WGMMA_INT8, "tile.int8_weight False"), (plan.WgmmaParams(64, 3, split=2), "tile.split 1")):
        with pytest.raises(ValueError, match=rule):
            plan.GroupedWgmmaParams(tile).check()
    g = plan.GROUPED_WGMMA
    g.check()
    assert g.defines() == {**g.tile.defines(), "GROUPED": 1}
    # experts of 1 and 65 rows: 1 + 2 chunks of 64 <= min(E, T) + T // 64 for any split of 66 rows over 2
    assert g.items(66, 2) == 3 and g.items(1, 256) == 1 and g.items(32768, 256) == 256 + 512
    assert g.workspace_bytes(66, 2, 7168) == 28 * 3 * g.tile.ablob_bytes
    # DeepSeek-R1 gate_up at 4096, 1024 and 128 tokens (128, 32 and 4 rows an expert)
    assert plan.grouped_heuristic(32768, 256, 4096, 7168) == plan.GROUPED_WGMMA_TN128
    assert plan.grouped_heuristic(8192, 256, 4096, 7168) == g
    assert isinstance(plan.grouped_heuristic(1024, 256, 4096, 7168), plan.GroupedStreamParams)


# ---- emulation of gemm_wgmma.cu's integer and float tricks ----------------------------------------

def shl_s8x4(x: int, s: int) -> int:
    return ((x << s) & 0xFFFFFFFF) & (0x01010101 * ((0xFF << s) & 0xFF))


def test_packed_int8_shift_every_value_and_shift():
    """shl_s8x4 shifts four packed int8 (twice e2m1 values, |v| <= 12) by 0..3, no carry between them."""
    import itertools

    values = [int(2 * v) for v in E2M1_VALUES]
    for s in range(4):
        for quad in itertools.product(values, repeat=4):
            word = int.from_bytes(bytes(v & 0xFF for v in quad), "little")
            got = shl_s8x4(word, s).to_bytes(4, "little")
            assert [int.from_bytes(got[j:j + 1], "little", signed=True) for j in range(4)] == [v << s for v in quad]


def test_biased_accumulator_start_gives_the_scaled_sum_exactly():
    """fold_start_bits (wgmma_band.cuh) starts the int32 accumulator at the bits of 1.5 * 2**23 *
    2**(e - 128) (e <= 232, fold_band's bound); after the int32 sum i is added, float(bits) - start is
    i * 2**(e - 128), exactly, for every |i| < 2**22 (a folded segment's sum is at most 256 * 96 * 96)."""
    import numpy as np

    e = np.arange(0, 233, dtype=np.int64)[:, None]
    i = np.array([0, 1, -1, 3, -7, 12345, -98765, 2 ** 21 + 17, -(2 ** 22 - 1), 2 ** 22 - 1], dtype=np.int64)[None, :]
    start = (0x4B400000 + (e - 128) * (1 << 23)).astype(np.uint32)
    x = (start.astype(np.int64) + i).astype(np.uint32).view(np.float32)
    got = x.astype(np.float64) - start.view(np.float32).astype(np.float64)
    assert ((got.astype(np.float32) - got) == 0).all()  # the float32 subtraction is exact
    assert (got == i * np.ldexp(1.0, (e - 128).astype(np.int32))).all()
    assert 256 * 96 * 96 < 2 ** 22
    # mx::fold_start (gemm_small.cu, gemm_stream.cu) writes the same bits another way
    assert ((((e + 22) << 23) | 0x400000).astype(np.uint32) == start).all()


def test_converter_multiplier_bits_of_normal_exponents():
    """mxfp4_gemm_cv's converter writes a block's multiplier 2**(e - 128) as the float bits
    e * 2**23 - 2**23 when all eight exponent bytes of the row's segment lie in 2..254 (the byte
    compares against 0x02 and 0xFE), mx::half_scale otherwise: the two agree on every such byte, and
    the test admits exactly 2..254."""
    import struct

    def bits_to_float(b: int) -> float:
        return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]

    normal = [e for e in range(256) if e >= 0x02 and e <= 0xFE]
    assert normal == list(range(2, 255))
    for e in normal:
        assert bits_to_float(e * (1 << 23) - (1 << 23)) == 2.0 ** (e - 128), e
    # the excluded bytes are the ones the shortcut gets wrong: 0 and 1 (subnormal halves), 255 (NaN)
    assert bits_to_float(1 * (1 << 23) - (1 << 23)) != 2.0 ** -127
    assert bits_to_float(255 * (1 << 23) - (1 << 23)) == 2.0 ** 127  # not NaN


# ---- the kernels' algorithm emulated (tests/wgmma_emulation.py) against the exact oracle ---------

EMULATED = [plan.WgmmaParams(64, 3), plan.WgmmaParams(128, 4, split=2), plan.WgmmaParams(128, 3, True)]


@pytest.mark.parametrize("params", EMULATED, ids=["tn64", "tn128s2", "i8"])
@pytest.mark.parametrize("kind", ["randn", "heavy", "mixed", "spread"])
def test_emulation_meets_the_contract(params, kind):
    """A's token bands, the weight's bands, a warpgroup's masks, the float32 order and the K split's sum on the
    CPU: inside the kernels' bound, NaN where the exact product has it, bit-identical on ordinary data;
    heavy-tailed, mixed and spread A take blocks outside the fold as terms of their own."""
    from .wgmma_emulation import emulate

    a, w = large_m_operands(200, 256, 1600, kind)
    terms = {}
    out = emulate(a, w, params, terms).to(torch.bfloat16)
    report = testing.check_gemm(out, a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert report.identical_fraction >= (0.999 if kind != "spread" else 0.98), report
    if kind != "randn":
        assert terms.get("terms", 0) > 0, terms


def test_emulation_meets_the_contract_on_the_fuzzers_large_m_cases():
    """The fuzzer's large-M cases (seed 5's first 120 of ``mxfp4 fuzz --large-m``: wide, mixed and cancelling
    profiles, NaN and Inf blocks) through the emulation on the variant the plan picks, judged as the fuzzer
    judges a GPU. Case 298 holds a zero A block under a large band multiplier against a large weight block
    outside the weight's band: a zero block's multiplier of the band's made that product Inf and the zero
    term NaN (17 of these cases failed so)."""
    from mxfp4 import fuzz

    from .wgmma_emulation import emulate

    ran = 0
    for i in list(range(120)) + [298]:
        case = fuzz.draw_case(5, i, large_m=True)
        if case.bias or case.entry not in ("gemm", "gemm_out", "op", "task"):
            continue
        failures = fuzz_case_failures(case, lambda a, w, p: emulate(a, w, plan.wgmma_params(p)))
        assert not failures, (i, case.describe(), failures)
        ran += 1
    assert ran >= 50, ran


@pytest.mark.gpu
@pytest.mark.parametrize("params", EMULATED, ids=["tn64", "tn128s2", "i8"])
@pytest.mark.parametrize("kind", ["randn", "heavy", "mixed", "spread"])
def test_kernel_is_the_emulation(params, kind):
    """The kernels' output is the emulation's, bit for bit (NaN where it is NaN)."""
    from .wgmma_emulation import emulate

    a, w = large_m_operands(200, 256, 1600, kind)
    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    out = mxfp4.gemm_a4w4(a.cuda(), wd, params=params).cpu()
    assert same_bits(out, emulate(a, w, params).to(torch.bfloat16))


# ---- on a Hopper GPU ----------------------------------------------------------------------------

LARGE_M = [plan.WgmmaParams(64, 3), plan.WgmmaParams(128, 4), plan.WgmmaParams(128, 3, True), plan.WgmmaParams(64, 3, split=3),
           plan.WgmmaParams(128, 4, split=2)]


@pytest.mark.gpu
@pytest.mark.parametrize("params", LARGE_M, ids=["tn64", "tn128", "i8", "tn64s3", "tn128s2"])
@pytest.mark.parametrize("m, n, k, kind", [(333, 2112, 2880, "randn"), (333, 2112, 2880, "mixed"),
                                           (200, 160, 768, "spread"), (65, 128, 256, "randn"),
                                           (33, 2112, 2880, "mixed"), (333, 80, 640, "randn"),
                                           (333, 2112, 2880, "heavy"), (100, 256, 1600, "heavy")])
def test_large_m_kernel_meets_the_contract(params, m, n, k, kind):
    if not params.fits(plan.Problem(m, n, k)):
        pytest.skip(f"{params} does not take {m}x{n}x{k}")
    a, w = large_m_operands(m, n, k, kind)
    kernel_meets_the_contract(a, w, params, 0.999 if kind != "spread" else 0.98)


@pytest.mark.gpu
@pytest.mark.parametrize("split", [2, 4, 6])
def test_large_m_k_split_runs_of_one_segment(split):
    """K split over a cluster with runs of 1 or 2 segments (6 segments over 4 CTAs: 1, 2, 1, 2): a
    rank's partial goes in its drained ring of codes while its converted tiles may still be read, on
    data whose warpgroups take different paths."""
    data = task_data(256, 1024, 1536, 5, "model", "cpu")  # weights with outlier columns: per-group paths
    kernel_meets_the_contract(data[0], shuffled_weight(data), plan.WgmmaParams(64, 3, split=split), 0.999, repeats=3)


@pytest.mark.gpu
@pytest.mark.parametrize("params", LARGE_M[:3], ids=["tn64", "tn128", "i8"])
def test_large_m_zero_block_under_a_large_band(params):
    """A token's zero block beside a block near 2**70 (its band's multiplier 2**68), against a weight row whose
    block there lies near 2**86, outside the row's band (its other blocks near 2**-100): that block is a term of
    its own, and the zero block's multiplier times the row's (2**152 if it were the band's) must not make the
    zero term NaN. The exact product is finite everywhere."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 256, generator=g)
    a[3] = 0.0
    a[3, 32:64] = torch.randn(32, generator=g) * 2.0 ** 70
    b = torch.randn(16, 256, generator=g)
    b[13] = torch.randn(256, generator=g) * 2.0 ** -100
    b[13, :32] = torch.randn(32, generator=g) * 2.0 ** 86
    w = mxfp4.prepare(mxfp4.quantize(b.to(torch.bfloat16)))
    kernel_meets_the_contract(a.to(torch.bfloat16), w, params, 0.999)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["wide", "special"])
def test_large_m_variants_on_special_values(kind):
    variants_meet_special_values(kind, 100, LARGE_M)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, kind", [(8192, 8192, 8192, "randn"), (4096, 7168, 7168, "randn"),
                                           (2048, 4608, 7168, "mixed"), (1024, 2880, 2880, "spread"),
                                           (1024, 2048, 7168, "heavy")])
def test_large_m_exact_at_prefill_sizes(m, n, k, kind):
    torch.manual_seed(0)
    a, w = large_m_operands(m, n, k, kind) if m <= 2048 else (None, None)
    if a is None:  # the big ones are drawn on the GPU (the task's generator)
        data = task.generate_input(m, n, k, 7, "cuda")
        a, w = data[0], MXFP4Tensor(data[3], data[4], (n, k), Layout.AITER_SHUFFLED)
    else:
        a, w = a.cuda(), mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    out = mxfp4.gemm_a4w4(a, w)
    report = testing.check_gemm(out, a, w, testing.sample_rows(m))
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert report.identical_fraction >= (0.98 if kind == "spread" else 0.999), report
    assert same_bits(out, mxfp4.gemm_a4w4(a, w))  # bitwise deterministic
