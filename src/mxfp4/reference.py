"""The exact GEMM on any device: the product of the quantized operands, rounded once to bf16.

Each 32-element block's dot product of doubled e2m1 values is an integer (|s| <= 4608, exact in
float64 whatever the summation order); it is scaled by the two block scales exactly (float64 holds
2**-256 .. 2**256), and the blocks are added in float64 in a fixed order, row by row, so a row's
result does not depend on the other rows of the batch. That sum is exact whenever the output's terms
span fewer than 2**53 units of its smallest term; the few outputs where they do not (cancellation of
blocks far larger than the result) are summed again exactly in Python integers. The result is
rounded to bf16 once (to nearest even, through round-to-odd, so there is no double rounding). NaN
scale bytes give NaN.
"""
from __future__ import annotations

import math

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


def _blocks(t: MXFP4Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Doubled e2m1 values [..., K/32, 32] (float64 integers), half-scales [..., K/32] (float64) and
    the half-scales' exponents (int64; the scale byte less 128)."""
    t = t.to_layout(Layout.PLAIN)
    codes = formats.unpack_codes(t.data)
    doubled = formats.e2m1_to_float(codes, torch.float64) * 2
    doubled = doubled.reshape(*codes.shape[:-1], codes.shape[-1] // BLOCK, BLOCK)
    return doubled, formats.e8m0_to_float(t.scales, torch.float64) / 2, t.scales.to(torch.int64) - 128


def float64_sum_exact(sums: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """Bool [R, N]: where adding the block terms ``sums[b] * 2**e[b]`` ([nb, R, N]: integer block sums,
    scale exponents) in float64 is exact in any order.

    Every partial sum is a multiple of 2**e_min (the smallest exponent with a nonzero block sum), so
    all are exact while U = sum |s_b| 2**(e_b - e_min) <= 2**53. U is computed in float64 within a
    factor 1 +- nb 2**-52 and is an integer, so a computed U < 2**53 / (1 + nb 2**-52) suffices.
    """
    nz = sums != 0
    e_min = torch.where(nz, e, torch.full_like(e, 1 << 20)).amin(0)
    shift = torch.where(nz, e - e_min, torch.zeros_like(e)).clamp(max=1000)
    units = (sums.abs() * formats.pow2(shift)).sum(0)
    return units < 2.0 ** 53 / (1 + sums.shape[0] * 2.0 ** -52)


def _exact_where_float64_is_not(acc: torch.Tensor, sums: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``acc`` [R, N] with the outputs whose float64 sum may have rounded (:func:`float64_sum_exact`)
    replaced by the exact sum: the terms added as Python integers and kept to 53 bits with a sticky bit
    (round to odd), which round_to_bf16 then rounds once. NaN outputs stay NaN.
    """
    redo = ~float64_sum_exact(sums, e) & ~torch.isnan(acc)
    if not bool(redo.any()):
        return acc
    rows, cols = redo.nonzero().unbind(1)
    # one device-to-host copy for all of them (not two synchronizations an element on a GPU)
    all_sums, all_exps = sums[:, rows, cols].t().cpu().tolist(), e[:, rows, cols].t().cpu().tolist()
    values = []
    for block_sums, exps in zip(all_sums, all_exps):
        terms = [(int(s), int(x)) for s, x in zip(block_sums, exps) if s]
        lo = min(x for _, x in terms)
        total = sum(s << (x - lo) for s, x in terms)
        mag = abs(total)
        extra = max(0, mag.bit_length() - 53)
        if extra:  # keep 53 bits, the last one sticky (round to odd): exact in float64, rounded once later
            mag = (mag >> extra) | (1 if mag & ((1 << extra) - 1) else 0)
        value = math.ldexp(float(mag), lo + extra)
        values.append(-value if total < 0 else value)
    acc = acc.clone()
    acc[rows, cols] = torch.tensor(values, dtype=torch.float64).to(acc.device)
    return acc


def _bias_terms(bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A float ``bias`` [N] as exact terms: integers [N] (float64) and exponents [N] (int64) with
    bias = integer * 2**exponent (a float's 24-bit significand and its exponent), and the mask of its finite
    entries (the others are added as they are: Inf or NaN is the result)."""
    finite = torch.isfinite(bias)
    frac, exp = torch.frexp(torch.where(finite, bias, torch.zeros_like(bias)).to(torch.float64))
    return torch.ldexp(frac, torch.full_like(exp, 24)), exp.to(torch.int64) - 24, finite


def _exponent_spread(doubled: torch.Tensor, exps: torch.Tensor) -> torch.Tensor:
    """[R]: the largest minus the smallest scale exponent among the blocks of each row (``doubled``
    [R, nb, 32], ``exps`` [R, nb]) that hold a nonzero value; 0 for a row without one."""
    nonzero = (doubled != 0).any(-1)
    big = torch.where(nonzero, exps, torch.full_like(exps, -(1 << 20))).amax(-1)
    small = torch.where(nonzero, exps, torch.full_like(exps, 1 << 20)).amin(-1)
    return torch.where(nonzero.any(-1), big - small, torch.zeros_like(big))


def _float64_matmul_limit(nb: int) -> int:
    """The largest exponent spread (a row's plus a column's, :func:`_exponent_spread`) at which every
    partial sum of an output's element products, in any order, is exact in float64: each product is an
    integer multiple of 2**e_min (the smallest product's unit) and the products of a block sum to at most
    4608 of their block's units, so all partial sums are below nb * 4608 * 2**spread units; that is
    < 2**53 with a margin of one binade."""
    return 53 - (nb * 4608).bit_length() - 1


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, *, scale_rule: ScaleRule = ScaleRule.AITER,
              out_dtype: torch.dtype | None = torch.bfloat16, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``dequant(quant(a)) @ dequant(w)^T (+ bias)`` for a [..., K] and w [N, K]; bf16, or float64 with
    ``out_dtype=None``.

    ``bias`` (a float [N]) is one more exact term of each output's sum, before its one rounding:
    ``round_bf16(exact(quant(a) @ w^T) + bias)``. Validation is the caller's (see :func:`mxfp4.gemm_a4w4`).
    """
    lead, k = a.shape[:-1], a.shape[-1]
    a2 = a.reshape(-1, k)
    codes, scales = formats.quantize_codes(a2, scale_rule)  # the PyTorch quantizer, never a kernel
    av, asc, aex = _blocks(MXFP4Tensor(formats.pack_codes(codes), scales, tuple(a2.shape), Layout.PLAIN,
                                       scale_rule))
    wv, wsc, wex = _blocks(w)
    n, nb = wv.shape[0], wv.shape[1]
    out = torch.empty((a2.shape[0], n), dtype=torch.float64, device=a.device)
    rows = max(1, _ROWS_ELEMENTS // max(1, n * nb))
    wv_b = wv.permute(1, 2, 0)  # [nb, 32, N]
    if bias is not None:
        b_int, b_exp, b_finite = _bias_terms(bias.to(a.device))
    else:  # where no output's sum can round, one float64 matmul of the exact values gives it
        spread_w = _exponent_spread(wv, wex)
        spread = _exponent_spread(av, aex).unsqueeze(1) + spread_w.unsqueeze(0)  # [M, N]
        fits = (spread <= _float64_matmul_limit(nb)).all(1)  # rows whose outputs all take it
        wq = (wv * wsc.unsqueeze(-1)).reshape(n, -1).t()
    for r0 in range(0, a2.shape[0], rows):
        r1 = min(r0 + rows, a2.shape[0])
        if bias is None and bool(fits[r0:r1].all()):
            out[r0:r1] = (av[r0:r1] * asc[r0:r1].unsqueeze(-1)).reshape(r1 - r0, -1) @ wq
            continue
        sums = torch.bmm(av[r0:r1].permute(1, 0, 2), wv_b)  # [nb, rows, N], exact integers
        scaled = sums * asc[r0:r1].t().unsqueeze(-1) * wsc.t().unsqueeze(1)
        acc = torch.zeros((r1 - r0, n), dtype=torch.float64, device=a.device)
        for b in range(nb):  # fixed order, independent of the batch
            acc += scaled[b]
        e = aex[r0:r1].t().unsqueeze(-1) + wex.t().unsqueeze(1)  # [nb, rows, N]
        if bias is not None:  # the bias as the last term: its significand at its exponent
            shape = (1, r1 - r0, n)
            sums = torch.cat([sums, b_int.expand(shape)])
            e = torch.cat([e, b_exp.expand(shape)])
            acc += b_int * formats.pow2(b_exp)
        out[r0:r1] = _exact_where_float64_is_not(acc, sums, e)
    if bias is not None:
        out = torch.where(b_finite, out, out + bias.to(torch.float64))
    out = out.reshape(*lead, n)
    return out if out_dtype is None else round_to_bf16(out)
