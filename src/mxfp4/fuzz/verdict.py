"""A fuzz case's verdict: its counts and failures (``Result``), the generator its operands come from, and the
comparison of an output with the oracle's exact result under the contract (the module docstring of
``mxfp4.fuzz``)."""
from __future__ import annotations

import dataclasses

import torch

from .cases import Case
from .oracle import Exact, ulp_bf16


@dataclasses.dataclass
class Result:
    elements: int = 0
    identical: int = 0
    failures: list = dataclasses.field(default_factory=list)  # one-line descriptions
    outside_domain: int = 0   # outputs off the contract where its domain is not met (not failures)
    deviations: list = dataclasses.field(default_factory=list)
    on_reference: bool = False


def case_generator(case: Case) -> torch.Generator:
    """The generator a case draws its operands (then its bias) from."""
    return torch.Generator().manual_seed(case.seed * 1_000_003 + case.index)


def compare(out: torch.Tensor, exact: Exact, k: int, cuda: bool, res: Result, biased: bool = False) -> Result:
    o = out.to(torch.float64)
    want = exact.bf16.to(torch.float64)
    same = (o == want) | (torch.isnan(o) & torch.isnan(want))
    res.elements += o.numel()
    res.identical += int(same.sum())
    nan_bad = torch.isnan(o) != torch.isnan(exact.value)
    inf_bad = torch.isinf(o) != torch.isinf(want)
    both = torch.isfinite(o) & torch.isfinite(want)
    bound = ulp_bf16(exact.value) + (k // 32) * 2.0 ** -24 * exact.magnitude
    if biased and cuda:  # the kernels' float32 total plus the bias, one more float32 rounding
        bound = bound + 2.0 ** -24 * exact.value.abs()
    err = (o - exact.value).abs()
    over = both & (err > bound)
    if cuda:  # the bound and NaN/Inf, inside the kernel's stated domain
        domain, rule = exact.in_domain, "bound"
        bad = (over | nan_bad | inf_bad) & domain
        outside = (over | nan_bad | inf_bad) & ~domain
    else:  # the reference: bit-exact everywhere, NaN and Inf included
        rule = "bit-exact"
        bad = ~same
        outside = torch.zeros_like(bad)
    res.outside_domain += int(outside.sum())
    for mask, sink, what in ((bad, res.failures, f"break the {rule} contract"),
                             (outside, res.deviations, "deviate outside the stated domain")):
        if mask.any():
            i, j = mask.nonzero()[0].tolist()
            sink.append(f"{int(mask.sum())} of {o.numel()} outputs {what}; first [{i}, {j}]: "
                        f"out {o[i, j].item():.9g}, exact {exact.value[i, j].item():.9g}, "
                        f"bf16(exact) {want[i, j].item():.9g}, bound {bound[i, j].item():.3g}")
    return res
