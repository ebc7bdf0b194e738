"""Exactness checks shared by the tests, the tuner and the benchmark."""
from __future__ import annotations

import dataclasses

import torch

from . import formats
from .reference import round_to_bf16
from .tensor import Layout, MXFP4Tensor, dequantize


def ulp_bf16(x: torch.Tensor) -> torch.Tensor:
    """Spacing of bf16 numbers at |x| (float64); 2**-133 (the smallest subnormal) near zero."""
    mag = x.abs().to(torch.float64)
    _, exp = torch.frexp(mag)
    ulp = formats.pow2((exp.to(torch.int64) - 8).clamp(min=-133))
    return torch.where(mag == 0, torch.full_like(ulp, 2.0 ** -133), ulp)


@dataclasses.dataclass(frozen=True)
class ExactnessReport:
    """How a bf16 GEMM output compares with the exact product of the quantized operands."""

    elements: int
    identical_fraction: float  # bit-identical to the float64 product rounded to bf16
    violations: int            # elements outside kernel_bound (the kernels' contract)
    max_excess: float          # largest |out - exact| / bound (<= 1 passes)
    nonfinite_mismatch: int    # NaN/Inf where the exact product rounded to bf16 has none, or the reverse

    @property
    def passed(self) -> bool:
        return self.violations == 0 and self.nonfinite_mismatch == 0 and self.identical_fraction >= 0.999


def kernel_bound(exact: torch.Tensor, magnitude: torch.Tensor, k: int) -> torch.Tensor:
    """The kernels' error bound per output: ``ulp_bf16(exact) + (K/32) * 2**-24 * sum|a_k w_k|``, the
    error of adding the K/32 exact block products in float32 (as aiter's MFMA does) and rounding to
    bf16."""
    return ulp_bf16(exact) + (k // formats.BLOCK) * 2.0 ** -24 * magnitude.to(torch.float64)


def biased_bound(exact: torch.Tensor, magnitude: torch.Tensor, k: int) -> torch.Tensor:
    """The kernels' bound with a bias (``exact``: the exact product plus the bias): :func:`kernel_bound` and
    one float32 rounding of the biased total, ``2**-24 * |exact|`` (``mxfp4.ops.add_bias``)."""
    return kernel_bound(exact, magnitude, k) + 2.0 ** -24 * exact.abs().to(torch.float64)


def sample_rows(m: int, limit: int = 1024, stride: int = 29) -> torch.Tensor | None:
    """Rows to check for an M-row output: None (all) up to ``limit`` rows, else every
    ``stride``-th row and the last one, so every output tile of 32 or more rows is checked (the
    float64 oracle of a prefill-sized product would take minutes)."""
    if m <= limit:
        return None
    return torch.tensor(sorted(set(range(0, m, stride)) | {m - 1}))


def exact_product(a: torch.Tensor, w: MXFP4Tensor, rows: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(exact, magnitude): float64 quant(a) @ w^T and |quant(a)| @ |w|^T, on a's device; only
    for the rows ``rows`` of a (flattened to 2-D) when given (A is quantized row by row)."""
    if rows is not None:
        a = a.reshape(-1, a.shape[-1])[rows.to(a.device)]
    a2 = a.reshape(-1, a.shape[-1])
    codes, scales = formats.quantize_codes(a2, w.scale_rule)  # the PyTorch quantizer, never a kernel
    aq = dequantize(MXFP4Tensor(formats.pack_codes(codes), scales, tuple(a2.shape), Layout.PLAIN, w.scale_rule),
                    torch.float64)
    wq = dequantize(w, torch.float64)
    exact = aq @ wq.T
    magnitude = aq.abs() @ wq.abs().T
    return exact.reshape(*a.shape[:-1], -1), magnitude.reshape(*a.shape[:-1], -1)


def check_gemm(out: torch.Tensor, a: torch.Tensor, w: MXFP4Tensor, rows: torch.Tensor | None = None
               ) -> ExactnessReport:
    """Compare ``out`` with the exact product under the project's stated bound (on the rows
    ``rows`` of the flattened output only, when given; ``elements`` counts what was checked)."""
    if rows is not None:
        out = out.reshape(-1, out.shape[-1])[rows.to(out.device)]
    return compare_with_exact(out, *exact_product(a, w, rows), w.shape[-1])


def compare_with_exact(out: torch.Tensor, exact: torch.Tensor, magnitude: torch.Tensor, k: int) -> ExactnessReport:
    """check_gemm's comparison, given :func:`exact_product`'s (exact, magnitude) for ``out``'s
    elements (so a caller checking several outputs of one problem computes the oracle once)."""
    out64 = out.to(torch.float64)
    rounded = round_to_bf16(exact)
    finite = torch.isfinite(rounded)  # an exact value past bf16's largest rounds to Inf: so must out
    nonfinite_mismatch = int((torch.isfinite(out64) != finite).sum())
    bound = kernel_bound(exact, magnitude, k)
    err = (out64 - exact).abs()
    ok = finite & torch.isfinite(out64)
    violations = int((err[ok] > bound[ok]).sum())
    max_excess = float((err[ok] / bound[ok]).max()) if ok.any() else 0.0
    same = (out == rounded) | (torch.isnan(out) & torch.isnan(exact))
    return ExactnessReport(out.numel(), float(same.double().mean()) if out.numel() else 1.0,
                           violations, max_excess, nonfinite_mismatch)
