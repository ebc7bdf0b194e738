"""The fuzzer's exact oracle, independent of the library: it shares nothing with ``reference.py``
or ``formats.py`` but ``unpack_codes`` (to read packed bytes). It quantizes with frexp and a
nearest-value search, sums each block's doubled codes as exact integers, adds the block terms
``s * 2**(ea + ew - 2)`` in int64 limbs of 24 bits (exact over the whole e8m0 range) and rounds once
to bf16.
"""
from __future__ import annotations

import dataclasses

import torch

BLOCK = 32
_MAGS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

def oracle_quantize(x: torch.Tensor, floor_rule: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes uint8 [..., K], scale bytes uint8 [..., K/32]) of x, by frexp and nearest-value search."""
    x64 = x.to(torch.float64)
    blocks = x64.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)
    nonfinite = ~torch.isfinite(blocks).all(-1)
    amax = torch.where(torch.isfinite(blocks), blocks.abs(), torch.zeros_like(blocks)).amax(-1)
    mant, ex = torch.frexp(amax)  # amax = mant * 2**ex, mant in [0.5, 1)
    floor = ex.to(torch.int64) - 1
    if floor_rule:
        e = floor - 2
    else:  # aiter: amax rounded up to the next power of two when its significand is >= 1.75
        rounded = floor + (mant >= 0.875).to(torch.int64)
        e = torch.where(rounded >= 128, torch.full_like(rounded, 129), rounded) - 2  # 2**128 is Inf: log2 -> clamp
    e = torch.where(amax == 0, torch.full_like(e, -127), e).clamp(-127, 127)
    q = blocks.abs() / torch.pow(2.0, e.to(torch.float64)).unsqueeze(-1)
    dist = (q.unsqueeze(-1) - torch.tensor(_MAGS, dtype=torch.float64)).abs()
    best = dist == dist.amin(-1, keepdim=True)
    even = best & (torch.arange(8) % 2 == 0)
    idx = torch.where(even.any(-1), even.to(torch.int8).argmax(-1), best.to(torch.int8).argmax(-1))
    codes = idx | (torch.signbit(blocks).to(torch.int64) << 3)
    codes = torch.where(nonfinite.unsqueeze(-1), torch.zeros_like(codes), codes)
    scales = torch.where(nonfinite, torch.full_like(e, 255), e + 127)
    return codes.reshape(x.shape).to(torch.uint8), scales.to(torch.uint8)


def _doubled(codes: torch.Tensor) -> torch.Tensor:
    """Twice the e2m1 value of each code (an integer, float64)."""
    mags = torch.tensor(_MAGS, dtype=torch.float64)[(codes & 7).long()] * 2
    return torch.where(codes >= 8, -mags, mags)


def oracle_values(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float64 values of unpacked codes [..., K] with scale bytes [..., K/32] (255: NaN)."""
    e = scales.to(torch.float64) - 127
    s = torch.where(scales == 255, torch.full_like(e, float("nan")), torch.pow(2.0, e - 1))
    return _doubled(codes) * s.repeat_interleave(BLOCK, -1)


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    """Nearest bf16 (ties to even) of float64 values, by rounding x / quantum to an integer."""
    _, ex = torch.frexp(x.abs())
    quantum = torch.pow(2.0, ((ex.to(torch.int64) - 1).clamp(min=-126) - 7).to(torch.float64))
    r = torch.round(x / quantum) * quantum  # torch.round: half to even
    r = torch.where(r.abs() >= 2.0 ** 128, torch.copysign(torch.full_like(r, float("inf")), x), r)
    return r.to(torch.bfloat16)


@dataclasses.dataclass
class Exact:
    """Per output element: the exact value (float64, exact to 25 bits and a sticky bit), its
    bf16 rounding, sum |a w|, and whether the block scale products lie in the kernel's domain."""

    value: torch.Tensor
    bf16: torch.Tensor
    magnitude: torch.Tensor
    in_domain: torch.Tensor


def oracle_gemm(a_codes, a_scales, w_codes, w_scales, bias: torch.Tensor | None = None) -> Exact:
    """The exact product of quantized A [M, K] and W [N, K] (unpacked codes, scale bytes), plus
    ``bias`` [N] (finite floats of at most 24 significant bits) as one more exact term of each sum."""
    m, k = a_codes.shape
    n, nb = w_codes.shape[0], k // BLOCK
    av = _doubled(a_codes).reshape(m, nb, BLOCK)
    wv = _doubled(w_codes).reshape(n, nb, BLOCK)
    s = torch.einsum("mbk,nbk->mnb", av, wv)  # exact integers, |s| <= 4608
    sabs = torch.einsum("mbk,nbk->mnb", av.abs(), wv.abs())
    ea, ew = a_scales.long() - 127, w_scales.long() - 127
    nan = (a_scales == 255).any(-1)[:, None] | (w_scales == 255).any(-1)[None, :]
    ea, ew = torch.where(a_scales == 255, 0, ea), torch.where(w_scales == 255, 0, ew)
    esum = ea[:, None, :] + ew[None, :, :]  # [M, N, nb]: the block's term is s * 2**(esum - 2)
    in_domain = ((esum >= -147) & (esum <= 112)).all(-1) | nan
    e = esum - 2

    # exact sum in 24-bit limbs: the term's offset e + 256 in [0, 508] picks limb and shift
    off = e + 256
    limbs = torch.zeros(m * n, 23, dtype=torch.int64)
    vals = s.to(torch.int64) << (off % 24)
    limbs.scatter_add_(1, (off // 24).reshape(m * n, nb), vals.reshape(m * n, nb))
    if bias is not None:  # b = bs * 2**(be - 24), bs an integer below 2**24: offset be - 24 + 256
        bmant, bex = torch.frexp(bias.to(torch.float64))
        bs = (bmant * 2.0 ** 24).to(torch.int64)
        boff = bex.to(torch.int64) - 24 + 256
        limbs.scatter_add_(1, (boff // 24).repeat(m)[:, None], (bs << (boff % 24)).repeat(m)[:, None])

    def normalize(x):
        for i in range(22):
            c = x[:, i] >> 24
            x[:, i] -= c << 24
            x[:, i + 1] += c
        return x

    limbs = normalize(limbs)
    neg = limbs[:, 22] < 0
    limbs = torch.where(neg[:, None], normalize(-limbs), limbs)
    nz = limbs != 0
    h = (nz * torch.arange(23)).amax(-1)
    pad = torch.cat([torch.zeros(m * n, 1, dtype=torch.int64), limbs], 1)  # pad[:, j + 1] = limb j
    top, nxt = pad.gather(1, (h + 1)[:, None])[:, 0], pad.gather(1, h[:, None])[:, 0]
    below = torch.cat([torch.zeros(m * n, 2, dtype=torch.int64), nz.long().cumsum(1)], 1)  # below[:, j+2]: nz in 0..j
    sticky = below.gather(1, h[:, None])[:, 0] > 0  # any limb under h - 1
    v = ((top * 2 ** 24 + nxt) * 2 + sticky.long()).to(torch.float64)
    value = torch.ldexp(v, (24 * (h - 1) - 257).to(torch.float64))
    value = torch.where(neg, -value, value).reshape(m, n)
    value = torch.where(nan, torch.full_like(value, float("nan")), value)

    mag = (sabs * torch.pow(2.0, e.to(torch.float64))).sum(-1)
    return Exact(value, round_bf16(value), mag, in_domain)


def ulp_bf16(x: torch.Tensor) -> torch.Tensor:
    _, ex = torch.frexp(x.abs())
    return torch.pow(2.0, ((ex.to(torch.int64) - 1).clamp(min=-126) - 7).to(torch.float64))
