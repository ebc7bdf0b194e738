"""The fuzzer's grouped cases (``mxfp4 fuzz --grouped``): ``grouped_gemm_a4w4`` on a case's experts, each row
checked against its expert's exact product by the oracle."""
from __future__ import annotations

import torch

from .. import plan
from .cases import Case, make_grouped_operands
from .oracle import oracle_gemm, oracle_quantize
from .verdict import Result, case_generator, compare


def grouped_variant(case: Case, t: int, n16: int, k64: int):
    """The grouped kernel ``case.variant`` forces (None: the heuristic's): the streaming GEMM on chunks of 8 or
    16 rows (its tile as the heuristic sizes it) or the large-M kernels on token tiles of 64 or 128 rows."""
    if case.variant.startswith("stream "):
        return plan.grouped_stream_tile(int(case.variant.split()[1]) // 8, t, len(case.counts), n16, k64)
    return {"large-m tn 64": plan.GROUPED_WGMMA, "large-m tn 128": plan.GROUPED_WGMMA_TN128}.get(case.variant)


def run_grouped(case: Case, backend: str, device: torch.device) -> Result:
    """A grouped case: ``grouped_gemm_a4w4`` on the experts' stacked weight and each row's expert's exact
    product (plus its bias row) by the oracle."""
    import mxfp4
    from ..moe import ExpertWeights, grouped_gemm_a4w4

    a, ws, bias = make_grouped_operands(case, case_generator(case))
    res = Result()
    stacked = ExpertWeights.stack([mxfp4.quantize(w.to(device)) for w in ws])
    counts = torch.tensor(case.counts)
    offsets = counts.cumsum(0).to(torch.int64 if case.off64 else torch.int32).to(device)
    t = int(counts.sum())
    params = None
    if backend == "cuda":
        params = grouped_variant(case, t, -(-case.n // 16) * 16, 2 * stacked.weight.data.shape[1])
    if device.type == "cuda":  # poison the block torch.empty will hand out next
        torch.full((t, case.n), float("nan"), dtype=torch.bfloat16, device=device)
    out = grouped_gemm_a4w4(a.to(device), stacked, offsets, backend=backend, params=params,
                            bias=None if bias is None else bias.to(device))
    if tuple(out.shape) != (t, case.n) or out.dtype != torch.bfloat16:
        res.failures.append(f"output is {out.dtype} {tuple(out.shape)}, want bfloat16 {(t, case.n)}")
        return res
    out = out.cpu()
    a_codes, a_scales = oracle_quantize(a.reshape(-1, case.k), False)
    start = 0
    for e, c in enumerate(case.counts):
        if c:
            w_codes, w_scales = oracle_quantize(ws[e], False)
            exact = oracle_gemm(a_codes[start:start + c], a_scales[start:start + c], w_codes, w_scales,
                                None if bias is None else bias[e])
            compare(out[start:start + c], exact, case.k, backend == "cuda", res, bias is not None)
        start += c
    return res
