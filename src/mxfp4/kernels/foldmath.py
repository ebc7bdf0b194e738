"""The int8 fold's arithmetic on A in registers: per-row facts over a segment's blocks, the fold
rule, and the folded values with their factors (:mod:`mxfp4.fold` states the rule).

@triton.jit code only, shared by the A fold (:func:`mxfp4.kernels.int8.fold_rows`) and the
one-launch kernel (:mod:`mxfp4.kernels.fused`), so both fold A bit for bit alike.
"""
import triton
import triton.language as tl

from .direct import round_with_scales
from .numerics import _midpoint_bits, amax_scales, block_scales, pow2_f32, to_f32

MAX_SHIFT = tl.constexpr(3)  # 12 << 3 = 96 fits int8 (mxfp4.fold.MAX_SHIFT)


@triton.jit
def _scales(x, PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """x [PM, CB * 32] as float32 [PM, CB, 32] with its blocks' scales
    (:func:`mxfp4.kernels.numerics.block_scales`): (xf, bits, amax, e, nonfinite)."""
    xf = tl.reshape(to_f32(x), (PM, CB, 32))
    bits, amax, e, nonfinite = block_scales(xf, FLOOR_RULE)
    return xf, bits, amax, e, nonfinite


@triton.jit
def _facts_combine(hi1, lo1, nan1, hi2, lo2, nan2):
    return tl.maximum(hi1, hi2), tl.minimum(lo1, lo2), tl.maximum(nan1, nan2)


@triton.jit
def _no_facts(R: tl.constexpr):
    """The running facts (hi, lo, nan) of R rows before any block (:func:`_merge_scales`)."""
    return tl.full((R,), -1000, tl.int32), tl.full((R,), 1000, tl.int32), tl.zeros((R,), tl.int32)


@triton.jit
def _merge_scales(amax, e, nonfinite, hi, lo, nan):
    """Fold blocks with scales (amax, e, nonfinite) [PM, CB] (:func:`_scales`) into each row's
    running facts over a segment: the largest (hi) and smallest (lo) exponent of its blocks
    holding a nonzero code (its amax above the first midpoint, 0.25 * 2**e; -1000 / 1000 while
    none), and whether a block is non-finite (nan, int32). One reduction for the three."""
    nonzero = (amax > _midpoint_bits(e + 127, -2, 0, False)) & ~nonfinite
    h, lw, n = tl.reduce((tl.where(nonzero, e, -1000), tl.where(nonzero, e, 1000), nonfinite.to(tl.int32)), 1,
                         _facts_combine)
    return tl.maximum(hi, h), tl.minimum(lo, lw), tl.maximum(nan, n)


@triton.jit
def _merge_facts(x, hi, lo, nan, PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """The running facts (:func:`_merge_scales`) continued over the blocks of x [PM, CB * 32].
    bf16 blocks take their amax on the 16-bit patterns, then shift it to the float32 bits (the
    same value as widening each element first, one shift per block instead of per element)."""
    if x.dtype == tl.bfloat16:
        bf16_amax = tl.max(tl.reshape(x.to(tl.int16, bitcast=True) & 0x7FFF, (PM, CB, 32)), axis=2)
        amax, e, nonfinite = amax_scales(bf16_amax.to(tl.int32) << 16, FLOOR_RULE)
    else:
        _, _, amax, e, nonfinite = _scales(x, PM, CB, FLOOR_RULE)
    return _merge_scales(amax, e, nonfinite, hi, lo, nan)


@triton.jit
def _fold_rule(hi, lo):
    """(folded, ref) of rows from their facts: the spread of nonzero blocks is at most MAX_SHIFT
    (or there is no nonzero block, then R = 0)."""
    return (hi - lo <= MAX_SHIFT) | (hi == -1000), tl.where(hi == -1000, 0, hi)


@triton.jit
def _fold_scaled(xf, bits, e, nonfinite, folded, ref, PM: tl.constexpr, CB: tl.constexpr):
    """Quantize xf [PM, CB, 32] (scales known: :func:`_scales`) and fold it with its rows' facts
    (:func:`_fold_rounded`)."""
    return _fold_rounded(round_with_scales(xf, bits, e, nonfinite), e, nonfinite, folded, ref, PM, CB)


@triton.jit
def _fold_rounded(r, e, nonfinite, folded, ref, PM: tl.constexpr, CB: tl.constexpr):
    """Fold r [PM, CB, 32] (the blocks rounded with their own scales, :func:`round_with_scales`;
    no row facts needed yet) with its rows' facts: int32 [PM, CB * 32] values
    ``(2 * e2m1) << shift`` (shift 0 where a row is not folded), and each block's factor
    [PM, CB] (2**(R - 4) in a folded row, else 2**(e - 1); NaN for a non-finite block)."""
    shift = tl.where(folded[:, None], tl.minimum(tl.maximum(MAX_SHIFT - (ref[:, None] - e), 0), MAX_SHIFT), 0)
    # q = r * 2**(7 + shift) is an integer, |q| <= 96: add 1.5 * 2**23 (one FFMA) and read the
    # integer off the float's bits (no float -> int conversion, a slow instruction)
    mult = ((shift + 134) << 23).to(tl.float32, bitcast=True)
    q = (r * mult[:, :, None] + 12582912.0).to(tl.int32, bitcast=True) - 0x4B400000
    factor = tl.where(nonfinite, float("nan"), pow2_f32(tl.where(folded[:, None], ref[:, None] - 4, e - 1)))
    return tl.reshape(q, (PM, CB * 32)), factor


@triton.jit
def _fold_values(x, folded, ref, PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """Quantize x [PM, CB * 32] and fold it with its rows' facts (:func:`_fold_scaled`)."""
    xf, bits, _, e, nonfinite = _scales(x, PM, CB, FLOOR_RULE)
    return _fold_scaled(xf, bits, e, nonfinite, folded, ref, PM, CB)
