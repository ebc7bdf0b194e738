"""The exact PyTorch GEMM used as the oracle, on any device."""
from __future__ import annotations

import torch

from .formats import ScaleRule
from .tensor import MXFP4Tensor, dequantize, quantize


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, *, compute_dtype: torch.dtype = torch.float32,
              out_dtype: torch.dtype | None = torch.bfloat16,
              scale_rule: ScaleRule = ScaleRule.AITER) -> torch.Tensor:
    """``dequant(quant(a)) @ dequant(w)^T`` accumulated in ``compute_dtype``, cast to ``out_dtype``.

    ``a`` is [..., K] bf16 / fp16 / fp32, ``w`` an MXFP4 weight [N, K] in any layout. With
    ``compute_dtype=torch.float64`` and ``out_dtype=None`` this returns the product of the
    quantized operands to float64 accuracy (every product is exact; sums round at 2**-53
    relative, far below the bf16 output's 2**-9), which the tests use as the exact oracle.
    Validation is the caller's (see :func:`mxfp4.gemm_a4w4`).
    """
    aq = dequantize(quantize(a, scale_rule), compute_dtype)
    wq = dequantize(w, compute_dtype)
    out = aq @ wq.transpose(-1, -2)
    return out if out_dtype is None else out.to(out_dtype)
