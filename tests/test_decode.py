"""The two-launch decode kernels (cuda/csrc/gemm_decode.cu, plan.DecodeParams), on a Hopper GPU (marker
gpu): every variant against the exact oracle, mt tokens a CTA, split over a cluster, the weight through
shared memory or not. Their special values: tests/test_small.py (with the other small-M kernels); the
grouped kernel built on the same tile: tests/test_moe.py."""
import pytest

from mxfp4 import plan

from .cases import kernel_meets_the_contract, large_m_operands

pytestmark = pytest.mark.gpu


DECODE = [plan.DecodeParams(1, 4, 4, 8, 3), plan.DecodeParams(2, 2, 4, 16, 3), plan.DecodeParams(4, 4, 2, 8, 12),
          plan.DecodeParams(8, 2, 4, 8, 2), plan.DecodeParams(4, 16, 1, 8, 1),
          plan.DecodeParams(2, 2, 4, 16, 3, smem_weight=True), plan.DecodeParams(1, 8, 2, 8, 5, smem_weight=True)]


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
