"""The PyTorch reference GEMM against the exact float64 oracle of mxfp4.testing.check_gemm.

check_gemm's bound: every element within ulp_bf16(exact) + 2**-20 * sum|a_k w_k| of the float64
product of the quantized operands, and >= 99.9% bit-identical to it rounded to bf16. The tests
also show the check fails on a corrupted output, so a pass means something.
"""
from __future__ import annotations

import pytest
import torch

import mxfp4
from mxfp4 import Layout, MXFP4Tensor
from mxfp4.reference import gemm_a4w4
from mxfp4.testing import check_gemm, exact_product, ulp_bf16


def operands(m: int, n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, MXFP4Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16))
    return a, w


@pytest.mark.parametrize("k", [64, 512, 1536])
@pytest.mark.parametrize("n", [16, 48, 200])
@pytest.mark.parametrize("m", [1, 7, 100, 333])
def test_reference_passes_the_exact_check(m, n, k):
    a, w = operands(m, n, k, seed=m * n + k)
    out = gemm_a4w4(a, w)
    assert out.dtype == torch.bfloat16 and out.shape == (m, n)
    report = check_gemm(out, a, w)
    assert report.passed, report
    if n % 16 == 0:  # the shuffled layout exists only for N % 16 == 0
        assert torch.equal(gemm_a4w4(a, w.to_layout(Layout.AITER_SHUFFLED)), out)


def test_float64_reference_is_the_exact_product():
    a, w = operands(33, 48, 512, seed=1)
    exact, _ = exact_product(a, w)
    assert torch.equal(gemm_a4w4(a, w, compute_dtype=torch.float64, out_dtype=None), exact)


def test_leading_batch_dims():
    """a [2, 3, K] gives [2, 3, N], the same rows as the flattened call."""
    a, w = operands(6, 48, 256, seed=2)
    a3 = a.reshape(2, 3, 256)
    out = gemm_a4w4(a3, w)
    assert out.shape == (2, 3, 48)
    assert torch.equal(out.reshape(6, 48), gemm_a4w4(a, w))
    assert check_gemm(out, a3, w).passed


def test_fp16_and_fp32_activations():
    a, w = operands(7, 16, 128, seed=3)
    for dtype in (torch.float16, torch.float32):
        out = gemm_a4w4(a.to(dtype), w)
        assert torch.equal(out, gemm_a4w4(a, w))  # bf16 values are exact in both: same quantization
        assert check_gemm(out, a.to(dtype), w).passed


def test_nonfinite_activation_block_makes_its_row_nan():
    """An Inf in a's block gives e8m0 NaN for the block, so the whole output row is NaN, as in the oracle."""
    a, w = operands(4, 16, 64, seed=4)
    a[2, 40] = float("inf")
    out = gemm_a4w4(a, w)
    assert torch.isnan(out[2]).all() and torch.isfinite(out[[0, 1, 3]]).all()
    assert check_gemm(out, a, w).passed


# ---- the check can fail -----------------------------------------------------------------------

def test_check_fails_when_a_weight_scale_byte_is_flipped():
    a, w = operands(7, 48, 512, seed=5)
    scales = w.scales.clone()
    scales[5, 3] ^= 1  # one block of one output column, off by a factor 2 (or 1/2)
    bad = gemm_a4w4(a, MXFP4Tensor(w.data, scales, w.shape))
    report = check_gemm(bad, a, w)
    assert not report.passed
    assert report.violations > 0 and report.max_excess > 1


def test_check_fails_one_ulp_beyond_the_bound():
    """Step one element away from zero, one bf16 ulp at a time: the last value inside the bound
    passes, the first one outside is exactly one violation."""
    a, w = operands(7, 48, 512, seed=6)
    out = gemm_a4w4(a, w)
    exact, magnitude = exact_product(a, w)
    bound = ulp_bf16(exact) + 2.0 ** -20 * magnitude
    i, j = 3, 17
    assert exact[i, j] != 0 and torch.sign(out[i, j].double()) == torch.sign(exact[i, j])
    bits = out[i, j:j + 1].view(torch.int16).clone()
    inside = bits.clone()
    while (bits.view(torch.bfloat16).double() - exact[i, j]).abs() <= bound[i, j]:
        inside, bits = bits.clone(), bits + 1  # +1 on the bit pattern: the next bf16 away from zero
    bad = out.clone()
    bad[i, j] = inside.view(torch.bfloat16)[0]
    assert check_gemm(bad, a, w).violations == 0
    bad[i, j] = bits.view(torch.bfloat16)[0]
    report = check_gemm(bad, a, w)
    assert report.violations == 1 and report.max_excess > 1 and not report.passed


def test_check_fails_on_nan_where_the_product_is_finite():
    a, w = operands(4, 16, 64, seed=7)
    out = gemm_a4w4(a, w)
    out[1, 2] = float("nan")
    report = check_gemm(out, a, w)
    assert report.nonfinite_mismatch == 1 and not report.passed


def test_check_fails_when_too_few_elements_are_bit_identical():
    """Every element one ulp off (still inside the bound) fails the 99.9% bit-identical rule."""
    a, w = operands(16, 48, 512, seed=8)
    out = gemm_a4w4(a, w)
    exact, _ = exact_product(a, w)
    toward_exact = torch.where((exact > out.double()) == (out > 0), 1, -1).to(torch.int16)
    nudged = (out.view(torch.int16) + toward_exact * (out != 0)).view(torch.bfloat16)
    report = check_gemm(nudged, a, w)
    assert report.violations == 0 and report.identical_fraction < 0.5 and not report.passed


def test_ulp_bf16_on_normal_and_subnormal_values():
    x = torch.tensor([1.0, 1.5, -3.0, 2.0 ** -126, 2.0 ** -130], dtype=torch.float64)
    assert ulp_bf16(x).tolist() == [2.0 ** -7, 2.0 ** -7, 2.0 ** -6, 2.0 ** -133, 2.0 ** -133]


def test_exact_zero_tolerates_only_the_smallest_subnormal():
    assert ulp_bf16(torch.zeros(1, dtype=torch.float64)).item() == 2.0 ** -133
    a, w = operands(2, 16, 64, seed=9)
    a[0] = 0  # row 0 of the exact product is exactly 0
    out = gemm_a4w4(a, w)
    out[0, 0] = 2.0 ** -9
    assert not check_gemm(out, a, w).passed


def test_row_sampled_check_sees_every_tile_and_a_wrong_row():
    """check_gemm on sampled rows: every 32-row tile is hit, the last row is in, and a wrong
    element in a sampled row is caught."""
    import mxfp4
    from mxfp4.testing import sample_rows

    assert sample_rows(1024) is None
    rows = sample_rows(2000)
    assert rows[-1].item() == 1999 and all(((rows >= t) & (rows < t + 32)).any() for t in range(0, 2000, 32))
    g = torch.Generator().manual_seed(4)
    a = torch.randn(70, 64, generator=g).to(torch.bfloat16)
    w = mxfp4.quantize(torch.randn(16, 64, generator=g).to(torch.bfloat16))
    out = mxfp4.reference.gemm_a4w4(a, w)
    rows = sample_rows(70, limit=0)
    assert check_gemm(out, a, w, rows).passed and check_gemm(out, a, w, rows).elements == len(rows) * 16
    bad = out.clone()
    bad[int(rows[1]), 3] += 1.0
    assert not check_gemm(bad, a, w, rows).passed
