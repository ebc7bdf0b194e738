"""The exact reference: float64 of the quantized operands rounded once, batch-independent."""
import pytest
import torch

import mxfp4
from mxfp4 import reference, testing

from .cases import CASES, exact_bf16, make_case


def bf16_neighbours_oracle(x: float) -> float:
    """Nearest bf16 to x (ties to even mantissa) by enumerating bf16 values around float32(x)."""
    import math
    if math.isnan(x):
        return x
    f = torch.tensor([x], dtype=torch.float64).to(torch.float32).view(torch.int32).item()
    cands = [((f >> 16) + d) & 0xFFFF for d in (-1, 0, 1, 2)]
    vals = [torch.tensor([c], dtype=torch.int32).to(torch.int16).view(torch.bfloat16).double().item() for c in cands]
    best = min(zip(vals, cands), key=lambda vc: (abs(vc[0] - x) if math.isfinite(vc[0]) else math.inf, vc[1] & 1))
    return best[0]


def test_round_to_bf16_single_rounding():
    xs = torch.tensor([1 + 2 ** -8 + 2 ** -40, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8 + 2 ** -30), 2 ** -134 * 1.5,
                       2 ** -140, 3.389e38, 1e39, 0.0], dtype=torch.float64)
    got = reference.round_to_bf16(xs).double().tolist()
    want = [bf16_neighbours_oracle(x) for x in xs.tolist()[:7]] + [float("inf"), 0.0]
    assert got == want
    r = torch.randn(20000, dtype=torch.float64) * 2.0 ** torch.randint(-130, 120, (20000,)).double()
    got = reference.round_to_bf16(r).double()
    for i in range(0, 20000, 997):
        assert got[i].item() == bf16_neighbours_oracle(r[i].item())


def test_wide_range_cancellation_is_exact():
    # a row whose blocks cancel at 2**40 and leave 1.0: float32 accumulation would give 0
    a = torch.zeros(1, 128)
    a[0, 0], a[0, 32], a[0, 64] = 2.0 ** 40, -(2.0 ** 40), 1.0
    w = mxfp4.quantize(torch.ones(16, 128))
    assert reference.gemm_a4w4(a, w)[0, 0].item() == 1.0


def test_cancellation_beyond_float64_is_exact():
    # 2**120, then 1.5 * 2**-10, then -2**120: in float64 the small term vanishes into the large one
    # before they cancel; the exact product is the small term
    a = torch.zeros(2, 96)
    a[:, 0], a[:, 32], a[:, 64] = 2.0 ** 120, 1.5 * 2.0 ** -10, -(2.0 ** 120)
    a[1, 33] = -(2.0 ** -12)  # and one whose remainder needs the sticky bit to round right
    w = mxfp4.quantize(torch.ones(16, 96))
    out = reference.gemm_a4w4(a, w)
    assert out[0, 0].item() == 1.5 * 2.0 ** -10
    assert torch.equal(out, exact_bf16(a, w))


def test_no_float32_overflow():
    a = torch.full((2, 64), 3e38)
    w = mxfp4.quantize(torch.full((16, 64), 1e-30))
    out = reference.gemm_a4w4(a, w, out_dtype=None)
    assert torch.isfinite(out).all() and 2e10 < out[0, 0].item() < 3e10


def test_batch_independent():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(40, 256, generator=g) * 2.0 ** torch.randint(-40, 40, (40, 8, 1), generator=g).repeat_interleave(
        32, 1).reshape(40, 256).float()
    w = mxfp4.quantize(torch.randn(48, 256, generator=g))
    full = reference.gemm_a4w4(a, w)
    for r in (0, 7, 39):
        assert torch.equal(reference.gemm_a4w4(a[r:r + 1], w), full[r:r + 1])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_against_oracle(case):
    a, w = make_case(case, "cpu")
    out = reference.gemm_a4w4(a, w)
    want = exact_bf16(a, w)
    same = (out.view(torch.int16) == want.view(torch.int16)) | (torch.isnan(out) & torch.isnan(want))
    # float64 summation is exact unless block terms of one output span more than 2**53
    # (cancelling blocks of far larger magnitude than the result, as the wide cases build)
    assert same.double().mean().item() >= (1.0 if case.kind == "randn" else 0.99)
    if case.kind == "randn":
        report = testing.check_gemm(out, a, w)
        assert report.passed and report.identical_fraction == 1.0



def _fraction_to_bf16(v) -> float:
    """The bf16 nearest to the exact rational v (ties to even), in Fraction arithmetic: one rounding."""
    from fractions import Fraction
    import math

    if v == 0:
        return 0.0
    e = math.floor(math.log2(abs(v)))  # may be off by one near a power of two: fixed below
    while Fraction(2) ** e > abs(v):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(v):
        e += 1
    quantum = Fraction(2) ** (max(e, -126) - 7)
    q = abs(v) / quantum
    n = q.numerator // q.denominator
    rest = q - n
    n += rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1)
    return math.copysign(float(n * quantum), v)


def _biased_oracle(a, w, bias) -> list[list[float]]:
    """round_bf16(quant(a) @ w^T + bias) in Python fractions: every product and the bias exact, one rounding."""
    from fractions import Fraction

    aq = mxfp4.dequantize(mxfp4.quantize(a), torch.float64).tolist()
    wq = mxfp4.dequantize(w, torch.float64).tolist()
    return [[_fraction_to_bf16(sum((Fraction(x) * Fraction(y) for x, y in zip(ar, wr)), Fraction(b)))
             for wr, b in zip(wq, bias.double().tolist())] for ar in aq]


@pytest.mark.parametrize("bias_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_bias_is_added_before_the_one_rounding(bias_dtype):
    """round_bf16(exact + b), against Python fractions; rounding the product first and adding the bias in bf16
    (two roundings) differs on some outputs, so the test can tell them apart."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(7, 64, generator=g).bfloat16()
    w = mxfp4.quantize(torch.randn(24, 64, generator=g).bfloat16())
    bias = (torch.randn(24, generator=g) * 2).to(bias_dtype)
    got = reference.gemm_a4w4(a, w, bias=bias)
    want = _biased_oracle(a, w, bias)
    assert got.dtype is torch.bfloat16 and got.double().tolist() == want
    assert (reference.gemm_a4w4(a, w) + bias.bfloat16()).double().tolist() != want


def test_bias_cancellation_and_extremes_are_exact():
    """A bias that cancels the product to its last bits, one 2**60 times larger (whose float64 sum would round:
    the exact integer path), one far smaller, and Inf / NaN."""
    g = torch.Generator().manual_seed(6)
    a = torch.randn(3, 96, generator=g).bfloat16()
    w = mxfp4.quantize(torch.randn(7, 96, generator=g).bfloat16())
    exact = reference.gemm_a4w4(a, w, out_dtype=None)[0]  # row 0's exact products (float64 holds them)
    bias = torch.stack([-exact[0].float(), -exact[1].float() * (1 + 2 ** -20), torch.tensor(2.0 ** 60 + 2 ** 37),
                        torch.tensor(2.0 ** 60), torch.tensor(2.0 ** -140), torch.tensor(float("inf")),
                        torch.tensor(float("nan"))])
    got = reference.gemm_a4w4(a, w, bias=bias)
    assert got[:, :5].double().tolist() == [row[:5] for row in _biased_oracle(a, w, bias[:5])]
    assert got[0, 1] != 0  # the residual of the cancellation, not 0
    assert torch.isinf(got[:, 5]).all() and (got[:, 5] > 0).all() and torch.isnan(got[:, 6]).all()
    near = reference.gemm_a4w4(a, w, bias=bias, out_dtype=None)[:, 3]  # 53 bits and a sticky bit
    assert (near != 2.0 ** 60).all()


@pytest.mark.parametrize("spread", [0, 20, 35, 36, 60])
def test_float64_matmul_rows_equal_the_block_sums(spread):
    """Rows whose block exponents span at most _float64_matmul_limit binades take one float64 matmul; its
    outputs equal the per-block exact sum's (bias 0 takes that path) bit for bit, on either side of the limit."""
    assert reference._float64_matmul_limit(18) == 35
    g = torch.Generator().manual_seed(spread)
    a = torch.randn(9, 576, generator=g)
    a[:, :32] *= 2.0 ** spread  # one block 2**spread above the others: the row's spread
    a[3] = 0.0  # a row without a nonzero block
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(40, 576, generator=g)))
    fast = reference.gemm_a4w4(a, w, out_dtype=None)
    assert torch.equal(fast, reference.gemm_a4w4(a, w, out_dtype=None, bias=torch.zeros(40)))
    assert torch.equal(reference.round_to_bf16(fast), reference.gemm_a4w4(a, w))
