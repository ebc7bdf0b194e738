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
