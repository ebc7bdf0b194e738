"""The large-M kernel's arithmetic, modelled on the CPU (tests/wgmma_model.py): the segment fold, the
one-term-a-segment fast path, the per-block slow path and the float32 runs meet the exactness
contract against the exact oracle, on data that takes each path. test_gpu holds the kernel to the
model bit for bit."""
import pytest
import torch

import mxfp4
from mxfp4 import testing

from .cases import Case, exact_bf16, kernel_domain, make_case
from .wgmma_model import model


def _operands(m, n, k, kind, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g)
    if kind == "spread":  # blocks over 24 binary orders: no segment folds
        a = a * torch.exp2(torch.randint(-12, 12, (m, k // 32), generator=g).float()).repeat_interleave(32, 1)
        b = b * torch.exp2(torch.randint(-12, 12, (n, k // 32), generator=g).float()).repeat_interleave(32, 1)
    if kind == "mixed":  # an outlier channel (its segment never folds), the first 7 rows spread (their
        a[:7] *= torch.exp2(torch.randint(-9, 9, (7, k // 32), generator=g).float()).repeat_interleave(32, 1)
        a[:, 5] *= 300.0  # tile never folds), the other tiles' other segments fold
    w = mxfp4.prepare(mxfp4.quantize(b.to(torch.bfloat16)))
    return a.to(torch.bfloat16), w


@pytest.mark.parametrize("m, n, k, kind, paths", [
    (100, 160, 512, "randn", {"fast"}),
    (333, 80, 640, "randn", {"fast", "slow"}),     # K = 20 blocks: the last segment is short (slow)
    (100, 160, 512, "spread", {"slow"}),
    (200, 144, 768, "mixed", {"fast", "slow"}),
])
@pytest.mark.parametrize("tn", [64, 96])
def test_model_meets_the_contract(m, n, k, kind, paths, tn):
    a, w = _operands(m, n, k, kind)
    stats = {}
    out = model(a, w, tn, stats)
    assert {p for p, c in stats.items() if c} == paths
    report = testing.check_gemm(out, a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert report.identical_fraction >= (1.0 if kind == "randn" else 0.999), report


@pytest.mark.parametrize("kind", ["wide", "special"])
def test_model_wide_and_special_values(kind):
    a, w = make_case(Case(kind, 100, 32, 512, kind), "cpu")
    out = model(a, w, 64)
    want = exact_bf16(a, w)
    domain = kernel_domain(a, w)
    assert domain.all() or kind == "special"  # row 4's 1e38 blocks leave it
    same = (out.view(torch.int16) == want.view(torch.int16)) | (torch.isnan(out) & torch.isnan(want))
    assert torch.equal(torch.isnan(out)[domain], torch.isnan(want)[domain])
    assert torch.equal(torch.isinf(out)[domain], torch.isinf(want)[domain])
    assert same[domain].double().mean().item() >= 0.98
    _, mag = testing.exact_product(a, w)
    ok = torch.isfinite(want.double()) & torch.isfinite(out.double()) & domain
    bound = 2 * testing.ulp_bf16(want.double()) + 2.0 ** -20 * mag
    assert ((out.double() - want.double()).abs()[ok] <= bound[ok]).all()
