"""The exact GEMM on any device: the float64 product of the quantized operands, rounded once.

Each 32-element block's dot product of doubled e2m1 values is an integer (|s| <= 4608, exact in
float64 whatever the summation order); it is scaled by the two block scales exactly (float64 holds
2**-256 .. 2**256), and the blocks are added in float64 in a fixed order, row by row, so a row's
result does not depend on the other rows of the batch. The sum is rounded to bf16 once (to nearest
even, through round-to-odd in float32, so there is no double rounding). NaN scale bytes give NaN.
"""
from __future__ import annotations

import torch

from . import formats
from .formats import BLOCK, ScaleRule
from .tensor import Layout, MXFP4Tensor

_ROWS_ELEMENTS = 1 << 24
"""Rows are processed in chunks of at most this many float64 block products (memory bound)."""


def round_to_bf16(x: torch.Tensor) -> torch.Tensor:
    """float64 -> bf16, round to nearest even, single rounding (NaN stays NaN, overflow gives Inf)."""
    x = x.to(torch.float64)
    f = x.to(torch.float32)
    back = f.to(torch.float64)
    # round toward zero to float32, then mark inexact results odd (round to odd)
    over = back.abs() > x.abs()
    f = torch.where(over, torch.nextafter(f, torch.zeros_like(f)), f)
    bits = f.view(torch.int32)
    bits = torch.where(f.to(torch.float64) != x, bits | 1, bits)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & ~0xFFFF
    bits = torch.where(finite, rounded, bits & ~0xFFFF)
    out = bits.view(torch.float32).to(torch.bfloat16)
    return torch.where(torch.isnan(x), torch.full_like(out, float("nan")), out)


def _blocks(t: MXFP4Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Doubled e2m1 values [..., K/32, 32] (float64 integers) and half-scales [..., K/32] (float64)."""
    t = t.to_layout(Layout.PLAIN)
    codes = formats.unpack_codes(t.data)
    doubled = formats.e2m1_to_float(codes, torch.float64) * 2
    doubled = doubled.reshape(*codes.shape[:-1], codes.shape[-1] // BLOCK, BLOCK)
    return doubled, formats.e8m0_to_float(t.scales, torch.float64) / 2


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, *, scale_rule: ScaleRule = ScaleRule.AITER,
              out_dtype: torch.dtype | None = torch.bfloat16) -> torch.Tensor:
    """``dequant(quant(a)) @ dequant(w)^T`` for a [..., K] and w [N, K]; bf16, or float64 with ``out_dtype=None``.

    Validation is the caller's (see :func:`mxfp4.gemm_a4w4`).
    """
    lead, k = a.shape[:-1], a.shape[-1]
    a2 = a.reshape(-1, k)
    codes, scales = formats.quantize_codes(a2, scale_rule)  # the PyTorch quantizer, never a kernel
    av, asc = _blocks(MXFP4Tensor(formats.pack_codes(codes), scales, tuple(a2.shape), Layout.PLAIN, scale_rule))
    wv, wsc = _blocks(w)
    n, nb = wv.shape[0], wv.shape[1]
    out = torch.empty((a2.shape[0], n), dtype=torch.float64, device=a.device)
    rows = max(1, _ROWS_ELEMENTS // max(1, n * nb))
    wv_b = wv.permute(1, 2, 0)  # [nb, 32, N]
    for r0 in range(0, a2.shape[0], rows):
        r1 = min(r0 + rows, a2.shape[0])
        sums = torch.bmm(av[r0:r1].permute(1, 0, 2), wv_b)  # [nb, rows, N], exact integers
        scaled = sums * asc[r0:r1].t().unsqueeze(-1) * wsc.t().unsqueeze(1)
        acc = torch.zeros((r1 - r0, n), dtype=torch.float64, device=a.device)
        for b in range(nb):  # fixed order, independent of the batch
            acc += scaled[b]
        out[r0:r1] = acc
    out = out.reshape(*lead, n)
    return out if out_dtype is None else round_to_bf16(out)
