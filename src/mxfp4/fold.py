"""The int8 fold: MXFP4 operands as int8 with each block's scale folded in, for exact int8 MMA.

Twice an e2m1 value is an integer in [-12, 12]. Inside a *segment* (a run of ``seg_blocks`` MX
blocks of one row), let R be the largest exponent of the blocks that hold a nonzero code. When
every such block has its exponent e >= R - 3, the row's segment is *folded*: each value is
stored as ``(2 * e2m1) << (3 - (R - e))`` (|q| <= 96, exact in int8) and the whole segment shares
one factor ``2**(R - 4)``. Products of folded segments then sum exactly in int32 (int8 MMA), and
one scaling per output element and segment ends them. A segment that spreads wider is stored
unshifted (``2 * e2m1``, factor ``2**(e - 1)`` per block) and marked not folded: the kernel
multiplies it block by block.

Produced here in torch for weights (once per weight; cached) and for tests; the Triton kernel
:func:`mxfp4.kernels.int8.fold_a_kernel` produces the same arrays from bf16 A, bit for bit.
A weight's fold also comes packed (:class:`PackedFold`: its e2m1 codes and the blocks' shifts,
about half the bytes, unpacked in the int8 kernels' registers, :mod:`mxfp4.kernels.packed`).
"""
from __future__ import annotations

import dataclasses

import torch

from . import formats
from .formats import BLOCK, E8M0_NAN
from .tensor import Layout, MXFP4Tensor

MAX_SHIFT = 3
"""Largest left shift of 2 * e2m1 that stays in int8 (12 << 3 = 96)."""


@dataclasses.dataclass(frozen=True)
class Folded:
    """An operand [R, K] in the fold's form (see the module doc).

    q: int8 [R, K]. block_scale: float32 [R, K/32], the factor of each block's stored integers
    (NaN for a NaN/Inf block). seg_scale: float32 [R, S], the shared factor of a folded segment
    (NaN if the segment holds a NaN block). folded: int8 [R, S], 1 where the segment is folded.
    """

    q: torch.Tensor
    block_scale: torch.Tensor
    seg_scale: torch.Tensor
    folded: torch.Tensor
    seg_blocks: int


@dataclasses.dataclass(frozen=True)
class PackedFold:
    """A weight's fold (:class:`Folded`) at about MXFP4 size: the same values, stored as e2m1
    codes and the blocks' shifts, for the kernels to unpack (:mod:`mxfp4.kernels.packed`).

    codes: uint8 [R, 32 * ceil(K / 64)], :func:`pack_codes`' order. shift: int32 words
    [R, ceil(K / (32 * step_blocks))], one per row and K step of ``step_blocks`` blocks
    (:func:`pack_shifts`). block_scale, seg_scale, folded, seg_blocks: as in :class:`Folded`.
    The folded value of element k is ``(2 * e2m1(code_k)) << shift_of_block(k // 32)``.
    """

    codes: torch.Tensor
    shift: torch.Tensor
    step_blocks: int
    block_scale: torch.Tensor
    seg_scale: torch.Tensor
    folded: torch.Tensor
    seg_blocks: int


def segments(k: int, seg_blocks: int) -> int:
    """Segments per row of K elements (the last one may be short)."""
    return -(-(k // BLOCK) // seg_blocks)


def pow2_f32(e: torch.Tensor) -> torch.Tensor:
    """2**e as float32, exact for e in [-149, 127] (subnormals included)."""
    return torch.ldexp(torch.ones_like(e, dtype=torch.float64), e.to(torch.float64)).to(torch.float32)


def _doubled(codes: torch.Tensor) -> torch.Tensor:
    """2 * e2m1 of codes [R, K] as int32 [R, K/32, 32] (exact: integers in [-12, 12])."""
    return (formats.e2m1_to_float(codes) * 2).to(torch.int32).view(codes.shape[0], -1, BLOCK)


def _shifted(v2: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """The fold's int8 values [R, K]: v2 [R, K/32, 32] shifted left by each block's shift [R, K/32]."""
    return (v2 << shift.to(torch.int32)[:, :, None]).view(v2.shape[0], -1).to(torch.int8)


def _fold_parts(codes: torch.Tensor, scale_bytes: torch.Tensor, seg_blocks: int):
    """(2 * e2m1 as int32 [R, K/32, 32], shift [R, K/32], block_scale, seg_scale, folded) of
    unpacked e2m1 codes [R, K] (uint8, 0..15) with their e8m0 bytes [R, K/32]."""
    if not isinstance(seg_blocks, int) or seg_blocks < 1:
        raise ValueError(f"seg_blocks must be a positive int, got {seg_blocks!r}")
    r, k = codes.shape
    nb = k // BLOCK
    segs = segments(k, seg_blocks)
    v2 = _doubled(codes)
    e = scale_bytes.to(torch.int32) - 127
    nan = scale_bytes == E8M0_NAN
    nz = (v2 != 0).any(dim=2) & ~nan
    pad = segs * seg_blocks - nb

    def per_seg(x: torch.Tensor, fill) -> torch.Tensor:
        return torch.nn.functional.pad(x, (0, pad), value=fill).view(r, segs, seg_blocks)

    hi = per_seg(torch.where(nz, e, -1000), -1000).amax(dim=2)
    lo = per_seg(torch.where(nz, e, 1000), 1000).amin(dim=2)
    any_nan = per_seg(nan, False).any(dim=2)
    folded = (hi - lo <= MAX_SHIFT) | (hi == -1000)  # no nonzero block: trivially folded
    ref = torch.where(hi == -1000, torch.zeros_like(hi), hi)
    ref_b = ref.repeat_interleave(seg_blocks, dim=1)[:, :nb]
    fold_b = folded.repeat_interleave(seg_blocks, dim=1)[:, :nb]
    shift = torch.where(fold_b, (MAX_SHIFT - (ref_b - e)).clamp(0, MAX_SHIFT), torch.zeros_like(e))
    eff = torch.where(fold_b, ref_b - 4, e - 1)
    nan_f = torch.tensor(float("nan"), device=codes.device)
    block_scale = torch.where(nan, nan_f, pow2_f32(eff))
    seg_scale = torch.where(any_nan, nan_f, pow2_f32(ref - 4))
    return v2, shift, block_scale, seg_scale, folded.to(torch.int8)


def fold_codes(codes: torch.Tensor, scale_bytes: torch.Tensor, seg_blocks: int) -> Folded:
    """Fold unpacked e2m1 codes [R, K] (uint8, 0..15) with their e8m0 bytes [R, K/32]."""
    v2, shift, block_scale, seg_scale, folded = _fold_parts(codes, scale_bytes, seg_blocks)
    return Folded(_shifted(v2, shift), block_scale, seg_scale, folded, seg_blocks)


RUN = 64
"""K elements per run of 32 packed bytes (:func:`pack_codes`): two MX blocks."""


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """uint8 [R, 32 * ceil(K / 64)] from e2m1 codes [R, K] (K % 32 == 0; a last run of 32 is
    padded with zero codes). Per run of 64 codes c0 .. c63 (two MX blocks), 32-bit word w
    (w = 0 .. 7) holds c[4w .. 4w+3] in its low 16 bits and c[32+4w .. 32+4w+3] in its high 16,
    four bits each from the least significant up: one ``prmt`` selects the four of the first
    block and one the four of the second, at the same K offsets (:mod:`mxfp4.kernels.packed`)."""
    r, k = codes.shape
    if k % BLOCK:
        raise ValueError(f"pack_codes needs K % {BLOCK} == 0, got K = {k}")
    pad = -k % RUN
    c = torch.nn.functional.pad(codes.to(torch.uint8), (0, pad)).view(r, -1, 2, 8, 2, 2)  # run, block, word, byte, nibble
    pairs = c[..., 0] | (c[..., 1] << 4)  # [R, runs, block, word, byte]: natural byte order per block
    return pairs.permute(0, 1, 3, 2, 4).reshape(r, -1).contiguous()  # word w: block 0's two bytes, block 1's


def unpack_codes(packed: torch.Tensor, k: int) -> torch.Tensor:
    """The inverse of :func:`pack_codes`: codes uint8 [R, k]."""
    r = packed.shape[0]
    b = packed.view(r, -1, 8, 2, 2).permute(0, 1, 3, 2, 4)  # run, block, word, byte
    c = torch.stack((b & 15, b >> 4), dim=-1)
    return c.reshape(r, -1)[:, :k].contiguous()


def pack_shifts(shift: torch.Tensor, step_blocks: int) -> torch.Tensor:
    """int32 words [R, ceil(KB / step_blocks)] from block shifts [R, KB] (0 .. 3): word s holds
    the shifts of blocks s * step_blocks + j, two bits each at bit 2 * j (an even step_blocks of
    at most 16, so that a K step is whole runs of :func:`pack_codes` and one word)."""
    if step_blocks not in (2, 4, 8, 16):
        raise ValueError(f"pack_shifts needs step_blocks in (2, 4, 8, 16), got {step_blocks!r}")
    r, kb = shift.shape
    s = torch.nn.functional.pad(shift.to(torch.int64), (0, -kb % step_blocks)).view(r, -1, step_blocks)
    words = (s << (2 * torch.arange(step_blocks, device=shift.device))).sum(dim=2)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack_shifts(words: torch.Tensor, kb: int, step_blocks: int) -> torch.Tensor:
    """The inverse of :func:`pack_shifts`: block shifts uint8 [R, kb]."""
    bits = 2 * torch.arange(step_blocks, device=words.device)
    s = (words.to(torch.int64)[:, :, None] >> bits) & 3
    return s.reshape(words.shape[0], -1)[:, :kb].to(torch.uint8)


def pack_tensor(t: MXFP4Tensor, seg_blocks: int, step_blocks: int) -> PackedFold:
    """The fold of a 2-D MXFP4 tensor (:func:`fold_tensor`) in its packed form, for kernels that
    take K steps of ``step_blocks`` blocks."""
    if len(t.shape) != 2:
        raise ValueError(f"pack_tensor needs a 2-D [R, K] MXFP4Tensor, got shape {t.shape}")
    t = t.to_layout(Layout.PLAIN)
    codes = formats.unpack_codes(t.data)
    _, shift, block_scale, seg_scale, folded = _fold_parts(codes, t.scales, seg_blocks)
    return PackedFold(pack_codes(codes), pack_shifts(shift, step_blocks), step_blocks, block_scale, seg_scale,
                      folded, seg_blocks)


def unpack_fold(p: PackedFold) -> Folded:
    """The :class:`Folded` form of a packed fold (for tests: it equals :func:`fold_tensor`'s)."""
    kb = p.block_scale.shape[1]
    codes = unpack_codes(p.codes, kb * BLOCK)
    return Folded(_shifted(_doubled(codes), unpack_shifts(p.shift, kb, p.step_blocks)), p.block_scale, p.seg_scale,
                  p.folded, p.seg_blocks)


def fold_tensor(t: MXFP4Tensor, seg_blocks: int) -> Folded:
    """Fold a 2-D MXFP4 tensor (any layout)."""
    if len(t.shape) != 2:
        raise ValueError(f"fold_tensor needs a 2-D [R, K] MXFP4Tensor, got shape {t.shape}")
    t = t.to_layout(Layout.PLAIN)
    return fold_codes(formats.unpack_codes(t.data), t.scales, seg_blocks)


def differing_arrays(a: Folded, b: Folded) -> list[str]:
    """Names of the arrays of ``a`` and ``b`` that are not bit-identical (floats compared by their
    bits, so equal NaNs match), and "seg_blocks" if those differ; [] when the folds are the same."""
    names = [] if a.seg_blocks == b.seg_blocks else ["seg_blocks"]
    for name in ("q", "block_scale", "seg_scale", "folded"):
        x, y = getattr(a, name).cpu(), getattr(b, name).cpu()
        if x.dtype == torch.float32 and y.dtype == torch.float32:
            x, y = x.view(torch.int32), y.view(torch.int32)
        if not torch.equal(x, y):
            names.append(name)
    return names


def unfold(f: Folded) -> torch.Tensor:
    """The operand's values as float64 [R, K] (for tests: they equal the MXFP4 values)."""
    scale = f.block_scale.to(torch.float64).repeat_interleave(BLOCK, dim=1)
    return f.q.to(torch.float64) * scale


def folded_weight(w: MXFP4Tensor, seg_blocks: int, packed_step: int = 0) -> Folded | PackedFold:
    """:func:`fold_tensor` (or with ``packed_step``, :func:`pack_tensor` for K steps of that
    many blocks) of a weight, computed once per (weight, seg_blocks, packed_step) and kept on
    the weight's data tensor (it lives as long as the weight; N * K bytes, about N * K / 2
    packed); recomputed if the data or scales were changed in place."""
    cache = getattr(w.data, "_mxfp4_folds", None)
    if cache is None:
        cache = {}
        w.data._mxfp4_folds = cache
    version = (w.data._version, w.scales._version, id(w.scales), w.layout)
    key = (seg_blocks, packed_step)
    hit = cache.get(key)
    if hit is None or hit[0] != version:
        fold = pack_tensor(w, seg_blocks, packed_step) if packed_step else fold_tensor(w, seg_blocks)
        hit = cache[key] = (version, fold)
    return hit[1]
