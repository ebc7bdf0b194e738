"""The banded GEMM (cuda/csrc/gemm_band.cu with quantize.cu's mxfp4_quantize_bands) emulated on the CPU,
written again from the kernels' comments: A's bands, the weight rows' windows and their warpgroup's W-loose
blocks, the fold and the loose pass, every float32 operation in the kernel's order (fmaf emulated exactly),
the stream-K split's partials added in CTA order. Its float32 totals rounded to bf16 are the kernel's output
bit for bit; on the CPU they are checked against the exact oracle (the algorithm's numerics), on a GPU against
the kernel (its implementation)."""
from __future__ import annotations

import torch

from mxfp4 import formats
from mxfp4.tensor import Layout, MXFP4Tensor, prepare

NAN = float("nan")


def half_scale(b: torch.Tensor) -> torch.Tensor:
    """mx::half_scale: 2**(b - 128) as float32, NaN for 255."""
    v = torch.pow(torch.tensor(2.0, dtype=torch.float64), b.to(torch.float64) - 128).to(torch.float32)
    return torch.where(b == 255, torch.full_like(v, NAN), v)


def fold_start(e: torch.Tensor) -> torch.Tensor:
    """mx::fold_start's bits (int64) for bytes <= 232; 1.5 * 2**23 (0x4B400000) above (row_start)."""
    return torch.where(e <= 232, ((e + 22) << 23) | 0x400000, torch.full_like(e, 0x4B400000))


def _bits(bits: torch.Tensor) -> torch.Tensor:
    b = bits & 0xFFFFFFFF
    b = torch.where(b >= 2**31, b - 2**32, b).to(torch.int32)
    return b.view(torch.float32)


def fma32(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """fmaf on float32 tensors: x * y exact in float64, the sum rounded to odd at 53 bits, then once to
    float32 (no double rounding)."""
    p = x.double() * y.double()
    zd = z.double()
    s = p + zd
    bp = s - zd
    err = (p - bp) + (zd - (s - bp))
    odd = (s.view(torch.int64) & 1) == 1
    fix = torch.isfinite(s) & (err != 0) & ~odd
    s = torch.where(fix, torch.nextafter(s, torch.where(err > 0, torch.full_like(s, float("inf")),
                                                        torch.full_like(s, -float("inf")))), s)
    return s.to(torch.float32)


def doubled(codes: torch.Tensor) -> torch.Tensor:
    """Twice the e2m1 values of ``codes`` (int64, -12..12): the kernels' int8 operands before any shift."""
    return (formats.e2m1_to_float(codes & 7, torch.float64) * 2).long() * torch.where(codes >= 8, -1, 1)


def a_blocks(a: torch.Tensor, tok: int, nblk8: int):
    """A [M, K] quantized on ``tok`` rows and ``nblk8`` blocks (zeros past M and K): doubled values [tok, nblk8,
    32] int64, scale bytes [tok, nblk8] int64, whether each block has a nonzero code [tok, nblk8]."""
    m, k = a.shape
    ap = torch.zeros(tok, nblk8 * 32, dtype=torch.float32)
    ap[:m, :k] = a.float()
    codes, sb = formats.quantize_codes(ap)
    codes = codes.long().reshape(tok, nblk8, 32)
    return doubled(codes), sb.long(), (codes & 7).ne(0).any(-1)


def quantize_bands(a: torch.Tensor, tok: int, nblk8: int):
    """mxfp4_quantize_bands: (values [3, tok, nblk8, 32] int64 (twice e2m1, shifted), scales [3, tok, nblk8]
    float32, masks [nseg, 3] int64 (8 bits a band))."""
    dv, sb, nz = a_blocks(a, tok, nblk8)
    isnan = sb == 255
    normal = nz & ~isnan
    seg = sb.reshape(tok, -1, 8)
    nrm = normal.reshape(tok, -1, 8)
    key0 = torch.where(nrm, seg + 1, 0)
    top0 = key0.amax(-1, keepdim=True)
    base0 = torch.where(top0 > 4, top0 - 4, 0)
    in0 = nrm & (seg >= base0)
    key1 = torch.where(nrm & ~in0, seg + 1, 0)
    top1 = key1.amax(-1, keepdim=True)
    base1 = torch.where(top1 > 4, top1 - 4, 0)
    in1 = nrm & ~in0 & (seg >= base1)
    inl = (nrm & ~in0 & ~in1) | isnan.reshape(tok, -1, 8)
    shift = torch.where(in0, seg - base0, torch.where(in1, seg - base1, 0)).reshape(tok, nblk8)
    band = torch.where(in0, 0, torch.where(in1, 1, torch.where(inl, 2, 3))).reshape(tok, nblk8)
    shifted = dv << shift[..., None]
    values = torch.stack([torch.where((band == j)[..., None], shifted, 0) for j in range(3)])
    zero = torch.zeros(tok, nblk8, dtype=torch.float32)
    s0 = torch.where(top0 > 0, half_scale(base0), 0.0).expand(-1, -1, 8).reshape(tok, nblk8)
    s1 = torch.where(top1 > 0, half_scale(base1), 0.0).expand(-1, -1, 8).reshape(tok, nblk8)
    sl = torch.where(band == 2, half_scale(sb), zero)
    scales = torch.stack([s0.float(), s1.float(), sl])
    bits = 1 << torch.arange(8)
    masks = torch.stack([((x.reshape(tok, -1, 8).any(0)) * bits).sum(-1) for x in (in0, in1, inl)], -1)
    return values, scales, masks


def weight_blocks(w: MXFP4Tensor, nblk8: int):
    """The prepared weight's doubled signed values [Np, nblk8, 32] (int64, zeros past K) and scale bytes
    [Np, nblk8] (the shuffled array's padding, 127, past K)."""
    w = prepare(w).to_layout(Layout.PLAIN)
    codes = formats.unpack_codes(w.data).long()
    np_, kp = codes.shape
    nblk = kp // 32
    dv = doubled(codes)
    vals = torch.zeros(np_, nblk8, 32, dtype=torch.int64)
    vals[:, :nblk] = dv.reshape(np_, nblk, 32)
    sb = torch.full((np_, nblk8), 127, dtype=torch.int64)
    sb[:, :nblk] = w.scales.long()[:, :nblk]
    return vals, sb, nblk


def emulate(a: torch.Tensor, w: MXFP4Tensor, tok: int, wg: int, ks: int, grid: int,
            paths: dict | None = None) -> torch.Tensor:
    """The kernels' float32 totals [M, N] for bf16 A [M, K] (K <= the weight's) and weight ``w``, on a
    variant of 8 * mt = tok tokens, wg warpgroups, units of ks blocks, launched on ``grid`` CTAs. ``paths``, if
    given, counts the paths taken: "band1" folds, "wloose" and "bandl" terms, "nan" rows."""
    paths = {} if paths is None else paths
    m, n = a.shape[0], w.shape[0]
    nblk = prepare(w).shape[1] // 32
    nblk8 = -(-nblk // 8) * 8
    wv, wsb, _ = weight_blocks(w, nblk8)
    av, asc, masks = quantize_bands(a, tok, nblk8)
    rows = 64 * wg
    chunks, tiles = -(-nblk // ks), -(-n // rows)
    units = tiles * chunks

    def piece(tile: int, c0: int, c1: int) -> torch.Tensor:
        """One CTA's float32 totals [tok, rows] of tile ``tile`` over chunks [c0, c1)."""
        acc = torch.zeros(rows, tok, dtype=torch.float32)
        for c in range(c0, c1):
            kb0 = c * ks
            nb = min(ks, nblk - kb0)
            for sg in range(-(-nb // 8)):
                b0 = kb0 + 8 * sg
                nv = min(8, nb - 8 * sg)
                for g in range(wg):
                    r = tile * rows + 64 * g + torch.arange(64)
                    live = r < n
                    rr = torch.where(live, r, 0)
                    e = torch.where(live[:, None], wsb[rr, b0:b0 + 8], 127)  # [64, 8]
                    valid = torch.arange(8) < nv
                    em = torch.where(valid, e, 255)
                    lo = em.amin(-1, keepdim=True)
                    s = em - lo
                    out = (s > 3) | (lo > 232)
                    q = torch.where(out, 32, s)  # 32: zero in the fold
                    lbits = ((out & valid).any(0) * (1 << torch.arange(8))).sum().item()
                    c_lo = fold_start(lo)  # [64, 1]
                    x = torch.where(live[:, None, None], wv[rr, b0:b0 + 8], 0)  # [64, 8, 32]
                    mk = masks[b0 // 8]
                    part = acc[64 * g:64 * g + 64]
                    xf = torch.where((q < 32)[..., None], x << torch.where(q < 32, q, 0)[..., None], 0)
                    for j in range(2):  # the fold: band 0, band 1 where any token has it
                        if j == 1 and not mk[1].item():
                            continue
                        paths["band1"] = paths.get("band1", 0) + j
                        d = torch.einsum("rbk,tbk->rt", xf, av[j, :, b0:b0 + 8])
                        v = _bits(d + c_lo) - _bits(c_lo)
                        part[:] = fma32(v, asc[j, :, b0][None, :].expand(64, -1), part)
                    rest = lbits | mk[2].item()
                    for b in range(8):
                        if not (rest >> b) & 1:
                            continue
                        qb, eb = q[:, b:b + 1], e[:, b:b + 1]
                        inw = qb < 32
                        l = torch.where(inw, c_lo, fold_start(eb))
                        mult = torch.where(inw | (eb <= 232), torch.ones_like(eb, dtype=torch.float32), half_scale(eb))

                        def term(xb, j):
                            key = "bandl" if j == 2 else "wloose"
                            paths[key] = paths.get(key, 0) + 1
                            d = torch.einsum("rk,tk->rt", xb, av[j, :, b0 + b])
                            v = _bits(d + l) - _bits(l)
                            f = mult * asc[j, :, b0 + b][None, :]  # overflow held at 2**127 (loose_factor)
                            part[:] = fma32(v, torch.where(f == float("inf"), 2.0 ** 127, f), part)

                        if (lbits >> b) & 1:  # bands 0, 1: the rows outside their window
                            xo = torch.where(~inw, x[:, b], 0)
                            for j in range(2):
                                if (mk[j].item() >> b) & 1:
                                    term(xo, j)
                            nanr = (eb == 255)[:, 0]
                            paths["nan"] = paths.get("nan", 0) + int(nanr.sum())
                            part[nanr] = NAN
                        if (mk[2].item() >> b) & 1:  # band L: every row
                            xa = torch.where(inw, x[:, b] << torch.where(inw, qb, 0), x[:, b])
                            term(xa, 2)
        return acc.t()

    out = torch.zeros(tok, tiles * rows, dtype=torch.float32)
    ranges = [(units * i // grid, units * (i + 1) // grid) for i in range(grid)]
    for t in range(tiles):
        total = None
        for ub, ue in ranges:  # the CTAs holding some of the tile, in CTA order
            lo_, hi_ = max(ub, t * chunks), min(ue, (t + 1) * chunks)
            if lo_ >= hi_:
                continue
            p = piece(t, lo_ - t * chunks, hi_ - t * chunks)
            total = p if total is None else total + p
        out[:, t * rows:(t + 1) * rows] = total
    return out[:m, :n]
