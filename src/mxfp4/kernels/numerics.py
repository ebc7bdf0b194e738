"""Element-level pieces every kernel shares: the MX block scale rule on float32 bits, powers of
two and e8m0 bytes as float32, float32 -> bf16 with round to nearest even, and a way to pin a
computation's place in the program.

@triton.jit code only. Where a piece's GPU form relies on inline PTX or on a conversion that
Triton 3.6's CPU interpreter gets wrong, it has an interpreter path beside it.
"""
import triton
import triton.language as tl

# Whether these functions run in Triton's CPU interpreter: decided at import, as triton.jit does.
_INTERPRETED = tl.constexpr(bool(triton.knobs.runtime.interpret))

# (midpoint exponent p, two mantissa bits m2, rounds up on a tie) for the e2m1 midpoints
# 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5: midpoint = (1 + m2/4) * 2**p.


@triton.jit
def _midpoint_bits(base, P: tl.constexpr, M2: tl.constexpr, UP: tl.constexpr):
    """float32 bits of (1 + M2/4) * 2**(P + e), minus 1 if ties round up; base = e + 127."""
    bt = base + P
    normal = (tl.minimum(bt, 255) << 23) | (M2 << 21)  # above the float range: no finite value exceeds it
    sub = (4 + M2) << tl.minimum(bt + 20, 20)  # bt <= 0 here; bt >= -2 always
    bits = tl.where(bt >= 1, normal, sub)
    if UP:
        bits = bits - 1
    return bits


@triton.jit
def to_f32(x):
    """x as float32. bf16 is widened by a shift of its bits: exact for subnormals too, which the
    triton 3.6 CPU interpreter's own bf16 -> float32 conversion gets wrong (on the GPU both are
    a shift)."""
    if x.dtype == tl.bfloat16:
        return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    else:
        return x.to(tl.float32)


@triton.jit
def block_exponent(amax, FLOOR_RULE: tl.constexpr):
    """A block's unbiased scale exponent (int32, in [-127, 127]) from the float32 bits of its
    finite amax, by the scale rule (mxfp4.formats.ScaleRule)."""
    if FLOOR_RULE:
        return tl.minimum(tl.maximum((amax >> 23) - 129, -127), 127)
    else:
        biased = (amax + 0x200000) >> 23
        return tl.where(biased == 255, 127, tl.minimum(tl.maximum(biased - 129, -127), 127))


@triton.jit
def block_scales(xf, FLOOR_RULE: tl.constexpr):
    """(bits, amax, e, nonfinite) of the blocks of xf float32 [B0, B1, 32] along the last axis:
    xf's int32 bits, each block's largest magnitude as float32 bits (0 in a block holding NaN or
    Inf), its scale exponent and whether it is non-finite ([B0, B1] each)."""
    bits = xf.to(tl.int32, bitcast=True)
    amax, e, nonfinite = amax_scales(tl.max(bits & 0x7FFFFFFF, axis=2), FLOOR_RULE)
    return bits, amax, e, nonfinite


@triton.jit
def amax_scales(amax, FLOOR_RULE: tl.constexpr):
    """(amax, e, nonfinite) of blocks from the float32 bits of their largest magnitude: 0 and
    non-finite where that is NaN or Inf, and the scale exponent."""
    nonfinite = amax >= 0x7F800000
    amax = tl.where(nonfinite, 0, amax)
    return amax, block_exponent(amax, FLOOR_RULE), nonfinite


@triton.jit
def pow2_f32(e):
    """2**e as float32 for int32 e in [-149, 127], subnormals exact."""
    return tl.where(e >= -126, (e + 127) << 23, 1 << tl.maximum(e + 149, 0)).to(tl.float32, bitcast=True)


@triton.jit
def _e8m0_to_f32(byte, extra_exp: tl.constexpr):
    """2**(byte - 127 + extra_exp) as float32; byte 255 -> NaN. Flushes to 0 below 2**-126."""
    biased = tl.minimum(tl.maximum(byte + extra_exp, 0), 255)
    value = (biased << 23).to(tl.float32, bitcast=True)
    return tl.where(byte == 255, float("nan"), value)


@triton.jit
def computed_here(x):
    """x (float32), computed at this point of the program: on the GPU it passes through an
    opaque move, so the compiler cannot sink its computation to its use (past a reduction's
    barriers, or into a branch); the identity under the CPU interpreter."""
    if _INTERPRETED:
        return x
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=False, pack=1)


@triton.jit
def f32_to_bf16_rne(x):
    """float32 -> bf16, round to nearest even, NaN kept a NaN. On the GPU the hardware's
    conversion (two values per instruction); under the CPU interpreter, whose ``.to(tl.bfloat16)``
    truncates (triton 3.6), the rounding in integer ops."""
    if not _INTERPRETED:
        return x.to(tl.bfloat16, fp_downcast_rounding="rtne")
    bits = x.to(tl.int32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    out = tl.where(nan, (bits >> 16) | 0x40, rounded)
    return out.to(tl.int16).to(tl.bfloat16, bitcast=True)
