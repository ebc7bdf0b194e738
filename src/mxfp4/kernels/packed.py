"""The folded weight at MXFP4 size: 4-bit codes and a 2-bit shift per block, unpacked in registers.

@triton.jit code only; the packed form is made by :func:`mxfp4.fold.packed_weight`. The int8
fold (:mod:`mxfp4.fold`) stores each weight value as ``(2 * e2m1) << shift`` in a byte, twice
the MXFP4 bytes. Here the weight keeps its e2m1 codes (two per byte, in an order made for the
unpack, below) and one shift per MX block (a byte), and the kernels rebuild the int8 values
after the load: half the weight's bytes for a few integer operations per element.

Unpack on the GPU, per 32-bit word of 8 codes: ``prmt`` picks bytes out of an 8-byte table, so
with the block's magnitudes ``{0, 1, 2, 3, 4, 6, 8, 12} << shift`` as the table, one ``prmt``
turns four codes' low three bits into four magnitudes. Its sign mode makes a code with bit 3 set
give 0 (the table's bytes are all below 128), so the positive values come from the word and the
negative ones from the word with its sign bits flipped; ``((pos | 0x80) - neg) ^ 0x80`` per byte
(no borrow crosses a byte) is then the two's-complement value. 13 instructions for 8 values.

Byte order in a word of codes e0 .. e7 (8 consecutive K elements): bytes ``e0|e2<<4, e4|e6<<4,
e1|e3<<4, e5|e7<<4``. The low 16 bits then select e0, e2, e4, e6 and the high 16 bits e1, e3, e5,
e7, which :func:`unpack_w` interleaves back with a join.
"""
import triton
import triton.language as tl

from .numerics import _INTERPRETED

_UNPACK_ASM = tl.constexpr("""{
.reg .b32 n, xh, nh, p0, q0, p1, q1;
xor.b32 n, $2, 0x88888888;
shr.u32 xh, $2, 16;
shr.u32 nh, n, 16;
prmt.b32 p0, $3, $7, $2;
prmt.b32 q0, $3, $7, n;
prmt.b32 p1, $3, $7, xh;
prmt.b32 q1, $3, $7, nh;
or.b32 p0, p0, 0x80808080;
sub.u32 p0, p0, q0;
xor.b32 $0, p0, 0x80808080;
or.b32 p1, p1, 0x80808080;
sub.u32 p1, p1, q1;
xor.b32 $1, p1, 0x80808080;
}""")


@triton.jit
def _code_value(c, s):
    """int32 ``(2 * e2m1(c)) << s`` of codes c (int32, 0 .. 15)."""
    mag = c & 7
    v = tl.where(mag < 2, mag, (2 + (mag & 1)) << ((mag >> 1) - 1))
    v = v << s
    return tl.where((c & 8) != 0, -v, v)


@triton.jit
def unpack_w(p, s, R: tl.constexpr, BK: tl.constexpr):
    """int8 [R, BK] weight values from packed codes p (uint8 [R, BK / 2], the module's byte
    order) and the shift of each of their blocks s (int32 [R, BK / 32], 0 .. 3)."""
    CB: tl.constexpr = BK // 32
    if not _INTERPRETED:
        sb = tl.reshape(tl.broadcast_to(tl.reshape(s, (R, CB, 1)), (R, CB, 16)), (R, BK // 2))
        lo, hi = tl.inline_asm_elementwise(_UNPACK_ASM, "=r,=r,r,r,r,r,r,r,r,r,r",
                                           [p, 0x03020100 << sb, 0x0C080604 << sb], dtype=(tl.int8, tl.int8),
                                           is_pure=True, pack=4)
        return tl.reshape(tl.join(lo, hi), (R, BK))
    else:
        # The CPU interpreter has no PTX: the same values by integer operations.
        b01, b23 = tl.split(tl.reshape(p, (R, BK // 8, 2, 2)))  # bytes (0, 2) and (1, 3) of each word
        b0, b2 = tl.split(b01)
        b1, b3 = tl.split(b23)
        sw = tl.reshape(tl.broadcast_to(tl.reshape(s, (R, CB, 1)), (R, CB, 4)), (R, BK // 8))
        b0 = b0.to(tl.int32)
        b1 = b1.to(tl.int32)
        b2 = b2.to(tl.int32)
        b3 = b3.to(tl.int32)
        e0 = _code_value(b0 & 15, sw)
        e2 = _code_value(b0 >> 4, sw)
        e4 = _code_value(b1 & 15, sw)
        e6 = _code_value(b1 >> 4, sw)
        e1 = _code_value(b2 & 15, sw)
        e3 = _code_value(b2 >> 4, sw)
        e5 = _code_value(b3 & 15, sw)
        e7 = _code_value(b3 >> 4, sw)
        # join stacks on a new last axis: element 4 * i2 + 2 * i1 + i0 takes i0 from the outer join
        even = tl.join(tl.join(e0, e4), tl.join(e2, e6))
        odd = tl.join(tl.join(e1, e5), tl.join(e3, e7))
        return tl.reshape(tl.join(even, odd), (R, BK)).to(tl.int8)


@triton.jit
def load_packed(w_ptr, sh_ptr, rows, row_ok, K, k0, k_hi, BK: tl.constexpr):
    """int8 [R, BK]: the packed weight's values (:func:`unpack_w`) in rows ``rows`` and columns
    [k0, k0 + BK), zeros past row_ok and past column k_hi (w_ptr: uint8 [N, K / 2], sh_ptr: uint8
    shifts [N, K / 32])."""
    kb = k0 // 2 + tl.arange(0, BK // 2)
    p = tl.load(w_ptr + rows[:, None] * (K // 2) + kb[None, :], mask=row_ok[:, None] & (kb < k_hi // 2)[None, :],
                other=0)
    return unpack_w(p, load_shifts(sh_ptr, rows, row_ok, K, k0, k_hi, BK), rows.shape[0], BK)


@triton.jit
def load_shifts(sh_ptr, rows, row_ok, K, k0, k_hi, BK: tl.constexpr):
    """int32 [R, BK / 32]: the packed weight's block shifts for rows ``rows``, columns [k0, k0 + BK)."""
    b = k0 // 32 + tl.arange(0, BK // 32)
    return tl.load(sh_ptr + rows[:, None] * (K // 32) + b[None, :], mask=row_ok[:, None] & (b < k_hi // 32)[None, :],
                   other=0).to(tl.int32)
