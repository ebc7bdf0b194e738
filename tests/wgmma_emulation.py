"""The large-M kernels (cuda/csrc/gemm_wgmma.cu: the prep, mxfp4_gemm_cv and mxfp4_gemm_i8) emulated on the CPU,
written again from the kernels' comments: A's token bands, masks and multipliers (wgmma_prep.cuh), the weight rows'
bands and multipliers (the converter, or the prep for the int8 GEMM), a warpgroup's masks (the AND over its tokens'
and rows') and the order of its float32 operations (wgmma_consumer.cuh: the fold, then the blocks outside it as terms
of their own), the K split's partials added in rank order. Its float32 totals rounded to bf16 are to be the
kernels' output bit for bit: on the CPU they are checked against the exact oracle (the algorithm's numerics), on a
GPU against the kernels (their implementation)."""
from __future__ import annotations

import torch

from mxfp4.params import WgmmaParams

from .band_emulation import NAN, _bits, a_blocks, fma32, half_scale, weight_blocks

SEG = 8
BITS = 1 << torch.arange(SEG)


def band_window(e: torch.Tensor) -> torch.Tensor:
    """band_window over the last dim (a segment's 8 blocks; -1: a zero block): the start of the window of 4
    exponents holding the most blocks, the lowest on a tie; 255 where no block has an exponent."""
    valid = e >= 0
    inside = (e[..., None, :] >= e[..., :, None]) & (e[..., None, :] <= e[..., :, None] + 3) & valid[..., None, :]
    key = torch.where(valid, (inside.sum(-1) << 8) | (255 - e), torch.zeros_like(e))
    return 255 - (key.max(-1).values & 255)


def a_tokens(a: torch.Tensor, tokens: int, nblk8: int):
    """The prep's A [M, K] on ``tokens`` rows (zeros past M and K): (values [tokens, nblk8, 32] int64, the blocks
    in the token's band shifted to its smallest exponent, fold multipliers [tokens, nseg] float32, block
    multipliers [tokens, nblk8] float32, the tokens' band masks [tokens, nseg] (8 bits))."""
    nblk = a.shape[1] // 32
    dv, sb, nz = (x.reshape(tokens, -1, SEG, *x.shape[2:]) for x in a_blocks(a, tokens, nblk8))
    anynan = (sb == 255).any(-1, keepdim=True)
    e = torch.where(nz & (sb != 255), sb, -1)
    lo = band_window(e)[..., None]
    cb = torch.arange(nblk8).reshape(1, -1, SEG)
    inb = (cb < nblk) & ((e < 0) | ((e >= lo) & (e <= lo + 3)))
    emin = torch.where(inb & (e >= 0), sb, 1000).amin(-1, keepdim=True)
    fm = torch.where(anynan, NAN, torch.where(emin == 1000, 0.0, half_scale(emin.clamp(max=254)))).float()
    shift = torch.where(inb & ~anynan & nz, sb - emin, 0)
    values = dv << shift[..., None]
    # a block's multiplier: the band's (a zero block's 0), its own outside the band, NaN for a token with a NaN block
    band = fm.expand_as(e)
    own = torch.where(inb, torch.where(e >= 0, band, torch.zeros_like(band)), half_scale(sb).float())
    blk = torch.where(anynan, band, own)
    mask = (inb * BITS).sum(-1)
    shape = (tokens, nblk8)
    return values.reshape(*shape, 32), fm[..., 0], blk.reshape(shape).float(), mask


def w_rows(w, nblk: int, nblk8: int, rows: int):
    """The weight as the converter (or the int8 GEMM's prep) gives it on ``rows`` rows (zeros and any band past
    its N16 rows): (shifted values [rows, nblk8, 32], multipliers [rows, nblk8] float32, fold starts [rows, nseg]
    int64, band bits [rows, nseg])."""
    vals, sb, _ = weight_blocks(w, nblk8)
    np_ = vals.shape[0]
    x = torch.full((rows, nblk8), 255, dtype=torch.int64)
    x[:np_] = torch.where(torch.arange(nblk8) < nblk, sb, 255)  # exponent bytes past K: 255, in no band
    xs = x.reshape(rows, -1, SEG)
    valid = xs != 255
    lo = torch.where(valid, xs, 255).amin(-1, keepdim=True)
    hi = torch.where(valid, xs, -1).amax(-1, keepdim=True)
    f = valid & (xs <= (lo + 3).clamp(max=255))
    g = valid & (xs >= hi - 3)
    high = (lo != 255) & (hi - lo > 3) & (g.sum(-1, keepdim=True) > f.sum(-1, keepdim=True))
    band = torch.where(high, g, f)
    base = torch.where(high, torch.where(g, xs, 255).amin(-1, keepdim=True), lo)
    none = ~band.any(-1, keepdim=True) | (base > 232)
    band = band & ~none
    base = torch.where(none, 0, base)
    bits = (band * BITS).sum(-1)
    bits[np_:] = 0xFF  # rows past the weight's: any band (they restrict no tile's mask)
    shift = torch.where(band, xs - base, 0).reshape(rows, nblk8)
    wv = torch.zeros(rows, nblk8, 32, dtype=torch.int64)
    wv[:np_] = vals << shift[:np_, :, None]
    mult = torch.where(band, half_scale(base.expand_as(xs)), half_scale(xs)).reshape(rows, nblk8).float()
    magic = 0x4B400000 + (base[..., 0] - 128) * (1 << 23)
    return wv, mult, magic, bits


def emulate(a: torch.Tensor, w, params: WgmmaParams, terms: dict | None = None) -> torch.Tensor:
    """The kernels' float32 totals [M, N] for A [M, K] and the prepared weight ``w`` on ``params`` (its tn,
    int8_weight and split). ``terms``, if given, counts under "terms" the (segment, block) positions taken as
    terms of their own by some warpgroup's token and row."""
    terms = {} if terms is None else terms
    m, n = a.shape[0], w.shape[0]
    nblk = w.data.shape[1] * 2 // 32
    nblk8 = -(-nblk // SEG) * SEG
    nseg = nblk8 // SEG
    tn = params.tn
    tokens, rows = -(-m // tn) * tn, -(-w.data.shape[0] // 128) * 128
    av, fold, blk, tmask = a_tokens(a, tokens, nblk8)
    wv, wmult, magic, wbits = w_rows(w, nblk, nblk8, rows)
    # a warpgroup: 64 tokens x 128 rows, or at tn 64 the tile's 64 tokens x 64 rows (mxfp4_gemm_cv)
    wrows = 64 if (tn == 64 and not params.int8_weight) else 128
    tg = torch.arange(tokens) // 64  # the token group of each token
    rg = torch.arange(rows) // wrows
    split = 1 if params.int8_weight else params.split
    parts = []
    for q in range(split):
        acc = torch.zeros(tokens, rows, dtype=torch.float32)
        for s in range(nseg * q // split, nseg * (q + 1) // split):
            nb = min(SEG, nblk - s * SEG)
            every = (1 << nb) - 1
            b0 = s * SEG
            wmask = torch.stack([(wbits[rg == g, s][:, None] & BITS).all(0) for g in range(rows // wrows)])
            wmask = (wmask * BITS).sum(-1)[rg]  # [rows]
            tmask_g = torch.stack([(tmask[tg == g, s][:, None] & BITS).all(0) for g in range(tokens // 64)])
            fm = ((tmask_g * BITS).sum(-1)[tg][:, None] & wmask[None, :]) & 0xFF
            pop = torch.zeros_like(fm)
            for b in range(SEG):
                pop += (fm >> b) & 1
            fm = torch.where(pop < 2, 0, fm)  # a fold of one block is a term
            rest = every & ~fm
            # the block sums (exact in float64: at most 32 * 96 * 96 each)
            d = torch.einsum("tbk,rbk->trb", av[:, b0:b0 + SEG].double(), wv[:, b0:b0 + SEG].double()).long()
            fold_sum = (d * ((fm[..., None] >> torch.arange(SEG)) & 1)).sum(-1)
            start = magic[:, s][None, :]
            v = _bits(start + fold_sum) - _bits(start.expand_as(fold_sum))
            acc = torch.where(fm != 0, fma32(v, fold[:, s][:, None].expand_as(v), acc), acc)
            for b in range(SEG):
                on = ((rest >> b) & 1) == 1
                if not on.any():
                    continue
                terms["terms"] = terms.get("terms", 0) + 1
                v = _bits(0x4B400000 + d[..., b]) - 12582912.0
                mult = blk[:, b0 + b][:, None] * wmult[:, b0 + b][None, :]  # float32 product
                acc = torch.where(on, fma32(v, mult, acc), acc)
        parts.append(acc)
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total[:m, :n]
