"""The banded GEMM (cuda/csrc/gemm_band.cu, quantize.cu's mxfp4_quantize_bands, plan.BandParams): its shared
memory as the kernel states it, its conversions checked exactly (its stream-K split and fold start are the
streaming GEMM's: tests/test_stream.py), its algorithm emulated on the CPU (tests/band_emulation.py) against
the exact oracle, its heuristic; on a Hopper GPU (marker gpu) the kernel against the emulation, bit for bit,
and the exact oracle."""
import functools

import pytest
import torch

import mxfp4
from mxfp4 import formats, plan, testing
from mxfp4.bench.data import heavy_tailed, model_like
from mxfp4.bench.shapes import shape_set
from mxfp4.cuda import jit

from .band_emulation import emulate
from .cases import (Case, fuzz_case_failures, large_m_operands, make_case, partial_meets_the_bound,
                    reads_fp16_and_float32_as_given, same_bits)
from .test_stream import prmt


def band_variants():
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    return [p for p in shipped if isinstance(p, plan.BandParams)] + BAND


BAND = [plan.BandParams(1, 1, 8, 4), plan.BandParams(1, 2, 16, 4), plan.BandParams(2, 2, 16, 3),
          plan.BandParams(2, 1, 8, 4, 6), plan.BandParams(4, 2, 16, 2), plan.BandParams(4, 1, 16, 2, 2),
          plan.BandParams(1, 3, 16, 3), plan.BandParams(1, 2, 16, 4, 8, True), plan.BandParams(2, 2, 16, 3, 4, True)]


@pytest.mark.slow  # 6-11 s on 2 cores: one NVRTC compile (PTX only) a build
def test_shared_memory_is_the_kernels():
    """The host's size of every shipped variant is the one the kernel exports (Smem::BYTES)."""
    variants = band_variants()
    assert {p.mt for p in variants} == {1, 2, 4}
    for p in variants:
        p.check()
        assert jit.exported_constant(p.source, p.defines(), "mxfp4_band_smem_bytes") == p.smem_bytes(), p


def test_impossible_variants_do_not_compile():
    with pytest.raises(jit.CompileError, match="MT must be 1, 2 or 4"):
        jit.compile_cubin("gemm_band.cu", dict(MT=3, WG=1, KS=8, STAGES=2, DEPTH=4, SPLIT=0))
    with pytest.raises(jit.CompileError, match="KS must be a multiple of 8"):
        jit.compile_cubin("gemm_band.cu", dict(MT=1, WG=1, KS=12, STAGES=2, DEPTH=4, SPLIT=0))
    with pytest.raises(jit.CompileError, match="exceeds the 227 KiB"):
        jit.compile_cubin("gemm_band.cu", dict(MT=4, WG=2, KS=32, STAGES=3, DEPTH=4, SPLIT=0))


def test_conversion_gives_the_shifted_signed_codes():
    """gemm_band.cu's convert and convert_signed: the tables shifted by a funnel shift (clamped: 32 and up give
    zeros), the positive codes' magnitudes minus the negative ones', byte by byte: twice the e2m1 values shifted
    left by 0..3, or zeros; the bytewise negation (0x80808080 - neg) ^ 0x80808080 (mx::e2m1x4_to_s8x4_shifted:
    convert_signed, the band quantizer, and the converting GEMM, whose tables are shifted by 0..3) the same
    values."""
    doubled = [int(2 * v) for v in formats.E2M1_VALUES]
    for amt in (0, 1, 2, 3, 32, 35):
        tl = ((0x03020100 << 32) << amt >> 32) & 0xFFFFFFFF if amt < 32 else 0
        th = ((0x0C080604 << 32) << amt >> 32) & 0xFFFFFFFF if amt < 32 else 0
        for c in range(0, 1 << 16, 7):
            pos = prmt(tl, th, c).to_bytes(4, "little")
            neg = prmt(tl, th, c ^ 0x8888).to_bytes(4, "little")
            want = [doubled[(c >> (4 * i)) & 0xF] * (1 << amt if amt < 32 else 0) for i in range(4)]
            assert [p - q for p, q in zip(pos, neg)] == want
            signed = prmt(tl, th, c) | (((0x80808080 - prmt(tl, th, c ^ 0x8888)) & 0xFFFFFFFF) ^ 0x80808080)
            assert [v - 256 if v > 127 else v for v in signed.to_bytes(4, "little")] == want


def _overflow_operands(m: int, n: int, k: int):
    """A loose term whose factor passes float32's range for a token with nothing in the term's band: token 0's
    first block at about 2**70 and its others at 2**-120, the other tokens' at 1; even weight rows' first block
    at 2**-100, their others at 2**110 (scale bytes above 232, outside the row's window). Every block pair
    inside the kernels' domain."""
    g = torch.Generator().manual_seed(11)
    a = torch.randn(m, k, generator=g)
    a[0, :32] *= 2.0 ** 70
    a[0, 32:] *= 2.0 ** -120
    b = torch.randn(n, k, generator=g)
    b[0::2, :32] *= 2.0 ** -100
    b[0::2, 32:] *= 2.0 ** 110
    return a.to(torch.bfloat16), mxfp4.prepare(mxfp4.quantize(b.to(torch.bfloat16)))


@functools.cache  # the GPU cases draw each one for every variant; nothing here writes into them
def _operands(kind: str, m: int, n: int, k: int):
    if kind == "overflow":
        return _overflow_operands(m, n, k)
    if kind in ("heavy", "model"):
        a, b = (heavy_tailed if kind == "heavy" else model_like)(m, n, k, 7, "cpu")
        return a, mxfp4.prepare(mxfp4.quantize(b))
    if kind == "special":
        return make_case(Case("special", m, n, k, "special"), "cpu")
    return large_m_operands(m, n, k, kind)


EMULATED = [(16, 256, 2048, "heavy", plan.BandParams(2, 2, 16, 3), 7),
            (5, 200, 1088, "model", plan.BandParams(1, 1, 8, 4), 5),
            (7, 160, 768, "spread", plan.BandParams(1, 1, 16, 4), 3),
            (32, 192, 1024, "mixed", plan.BandParams(4, 3, 8, 4), 6),
            (7, 32, 512, "special", plan.BandParams(1, 1, 8, 4), 2),
            (1, 48, 96, "randn", plan.BandParams(1, 2, 32, 2), 1),
            (8, 48, 64, "overflow", plan.BandParams(4, 2, 16, 2), 1)]


def test_emulation_meets_the_contract_on_the_fuzzers_cases():
    """The GPU fuzzer's ``gemm_params`` cases that land on a banded variant (seed 96's first 6,000: the wide,
    mixed and cancelling profiles among them, where the loose factor's overflow made outputs NaN) through the
    emulation at the launch's grid: inside the contract where its domain holds, as the fuzzer judges a GPU."""
    from mxfp4 import fuzz

    ran = 0
    for i in range(6000):
        case = fuzz.draw_case(96, i)
        if case.entry != "gemm_params" or not fuzz._kernel_accepts(case):
            continue
        params = fuzz.gemm_params_variant(case)
        if not isinstance(params, plan.BandParams):
            continue
        failures = fuzz_case_failures(case, lambda a, w, p: emulate(a, w, params.tokens, params.wg, params.ks,
                                                                     params.grid(p, 132)))
        assert not failures, (i, case.describe(), failures)
        ran += 1
    assert ran >= 20, ran


@pytest.mark.parametrize("m, n, k, kind, params, grid", EMULATED,
                         ids=lambda x: str(x) if isinstance(x, (int, str)) else "")
def test_emulation_meets_the_contract(m, n, k, kind, params, grid):
    """The algorithm (bands, windows, fold, loose pass, float32 order, the split's partials) on the CPU:
    inside the kernels' bound, NaN where the exact product has it, bit-identical on ordinary data; each
    data set takes the paths it is there for."""
    a, w = _operands(kind, m, n, k)
    paths = {}
    out = emulate(a, w, params.tokens, params.wg, params.ks, grid, paths).to(torch.bfloat16)
    report = testing.check_gemm(out, a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert report.identical_fraction >= (0.999 if kind != "special" else 0.95), report
    want = {"heavy": "band1", "model": "wloose", "spread": "bandl", "mixed": "bandl", "special": "bandl",
            "overflow": "wloose"}.get(kind)
    assert want is None or paths.get(want, 0) > 0, paths


def test_emulation_nan_weight_rows():
    """A weight block whose scale is NaN (byte 255) makes its row NaN for every token, a zero A block too."""
    a, w = large_m_operands(3, 64, 512, "randn")
    scales = w.to_layout(mxfp4.Layout.PLAIN).scales.clone()
    scales[5, 3] = 255
    a[:, 96:128] = 0.0
    plain = w.to_layout(mxfp4.Layout.PLAIN)
    w2 = mxfp4.prepare(mxfp4.MXFP4Tensor(plain.data, scales, plain.shape, mxfp4.Layout.PLAIN))
    paths = {}
    out = emulate(a, w2, 8, 1, 16, 2, paths)
    assert torch.isnan(out[:, 5]).all() and not torch.isnan(out[:, :5]).any() and paths["nan"] == 1


@pytest.mark.parametrize("m, n, k, taken", [(32, 57344, 8192, True), (17, 8192, 28672, True),
                                            (32, 13312, 16384, True), (16, 57344, 8192, False),
                                            (32, 8192, 8192, False), (33, 57344, 8192, False)])
def test_heuristic(m, n, k, taken):
    """The banded GEMM where it measured faster: 17..32 rows of a weight of at least 2**27 elements."""
    p = plan.band_heuristic(plan.Problem(m, n, k))
    assert (p is not None) == taken
    if taken:
        p.check()
        assert p.fits(plan.Problem(m, n, k)) and not p.sign_split and plan.heuristic(plan.Problem(m, n, k)) == p
        assert 1 <= p.grid(plan.Problem(m, n, k), 132) <= p.units(plan.Problem(m, n, k))
    assert plan.band_heuristic(plan.Problem(m, n, 512 * 256 + 64)) is None


def test_bad_params_name_the_rule():
    for bad, rule in ((plan.BandParams(3), "mt must be"), (plan.BandParams(wg=4), "wg must be"),
                      (plan.BandParams(ks=12), "ks must be"), (plan.BandParams(stages=1), "stages must be"),
                      (plan.BandParams(4, 2, 32, 3), "shared memory")):
        with pytest.raises(ValueError, match=rule):
            bad.check()


# ---- on a Hopper GPU ----------------------------------------------------------------------------

GPU_CASES = [(1, 2112, 2880, "randn"), (7, 160, 768, "spread"), (16, 2112, 2880, "mixed"), (32, 80, 640, "randn"),
             (5, 4096, 7168, "mixed"), (3, 16, 64, "randn"), (13, 48, 96, "randn"), (8, 8192, 4160, "randn"),
             (16, 512, 2048, "heavy"), (24, 768, 1536, "model"), (7, 32, 512, "special"), (8, 48, 64, "overflow")]


@pytest.mark.gpu
@pytest.mark.parametrize("params", BAND, ids=lambda p: f"mt{p.mt}wg{p.wg}ks{p.ks}st{p.stages}")
@pytest.mark.parametrize("m, n, k, kind", GPU_CASES, ids=lambda x: str(x))
def test_kernel_is_the_emulation(params, m, n, k, kind):
    """The kernel's output is the emulation's, bit for bit (NaN where it is NaN), the same on a second call;
    and inside the contract."""
    if not params.fits(plan.Problem(m, n, k)):
        pytest.skip(f"{params} holds {params.tokens} rows, not {m}")
    a, w = _operands(kind, m, n, k)
    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    out = mxfp4.gemm_a4w4(a.cuda(), wd, params=params)
    p = plan.Problem(m, -(-n // 16) * 16, -(-k // 64) * 64)
    grid = params.grid(p, torch.cuda.get_device_properties(0).multi_processor_count)
    want = emulate(a, w, params.tokens, params.wg, params.ks, grid).to(torch.bfloat16)
    assert same_bits(out.cpu(), want)
    assert same_bits(out, mxfp4.gemm_a4w4(a.cuda(), wd, params=params))
    if kind != "special":
        report = testing.check_gemm(out.cpu(), a, w)
        assert report.violations == 0 and report.nonfinite_mismatch == 0, report


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fp16_and_float32_activations_are_read_as_they_are(dtype):
    reads_fp16_and_float32_as_given(plan.BandParams(2, 2, 16, 3), dtype)


@pytest.mark.gpu
def test_float32_partial():
    partial_meets_the_bound(24, 8192, 16384, plan.BandParams)
