"""The folded weight at about MXFP4 size: 4-bit codes and 2-bit block shifts, unpacked in registers.

@triton.jit code only; the packed form is made by :func:`mxfp4.fold.pack_tensor`. The int8
fold (:mod:`mxfp4.fold`) stores each weight value as ``(2 * e2m1) << shift`` in a byte, twice
the MXFP4 bytes. The packed form keeps the e2m1 codes, in runs of 64 K elements (two MX
blocks, 32 bytes), and one 32-bit word of shifts per row and K step; the kernels rebuild the
int8 values after the load.

Made for wgmma's register operand. The int8 kernels multiply ``W x A^T`` with the weight tile
as the left operand, which wgmma reads from registers: 4 bytes of consecutive K per 32-bit
register. A run's word w holds codes 4w .. 4w+3 of the run's first block in its low 16 bits and
the same K offsets of its second block in its high 16 (:func:`mxfp4.fold.pack_codes`), so one
word unpacks into one register of each block, already where wgmma wants them: the unpack is
elementwise on the loaded words, and joining the two blocks (and the runs of a step) along K
only renames registers (a shared-memory round trip of the unpacked tile, as in the seventh and
eighteenth sessions' forms, cost more than the bytes saved). Even so the packed weight is slower
than the int8 one on every shape measured (H200, nineteenth session: 1.08-1.56x): its unpack
makes a 64 x 256 K step ~440 instructions a warp instead of 95 (sm_90 SASS), in a loop that
is latency bound.

Unpack on the GPU, per word: ``prmt`` picks bytes out of an 8-byte table with four 4-bit
selectors (the low 16 bits of its selector operand). With the block's magnitudes
``{0, 1, 2, 3, 4, 6, 8, 12} << shift`` as the table, a selector's bits 0-2 are the code's
magnitude index and its bit 3 (the sign) asks for the selected byte's sign bit, 0 here; so the
positive values come from the word, the negative ones' magnitudes from the word with its sign
bits flipped, and ``p | ((0x80808080 - q) ^ 0x80808080)`` joins them (no borrow crosses a
byte: magnitudes are at most 96). 11 instructions for 8 values.
"""
import triton
import triton.language as tl

from .numerics import _INTERPRETED

RUN = tl.constexpr(64)
"""K elements per run of packed codes (two MX blocks, 32 bytes)."""

_UNPACK_ASM = tl.constexpr("""{
.reg .b32 n, xh, nh, p0, q0, p1, q1;
xor.b32 n, $2, 0x88888888;
shr.u32 xh, $2, 16;
shr.u32 nh, n, 16;
prmt.b32 p0, $3, $7, $2;
prmt.b32 q0, $3, $7, n;
prmt.b32 p1, $11, $15, xh;
prmt.b32 q1, $11, $15, nh;
sub.u32 q0, 0x80808080, q0;
sub.u32 q1, 0x80808080, q1;
xor.b32 q0, q0, 0x80808080;
xor.b32 q1, q1, 0x80808080;
or.b32 $0, p0, q0;
or.b32 $1, p1, q1;
}""")


@triton.jit
def _code_value(c, s):
    """int32 ``(2 * e2m1(c)) << s`` of codes c (int32, 0 .. 15)."""
    mag = c & 7
    v = tl.where(mag < 2, mag, (2 + (mag & 1)) << ((mag >> 1) - 1))
    v = v << s
    return tl.where((c & 8) != 0, -v, v)


@triton.jit
def _block_values(b, s):
    """int32 [R, 32]: the values of one block's codes, bytes b (int32 [R, 8, 2]: word, byte) with
    the block's shift s (int32 [R, 1, 1])."""
    R: tl.constexpr = b.shape[0]
    return tl.reshape(tl.join(_code_value(b & 15, s), _code_value(b >> 4, s)), (R, 32))


@triton.jit
def _cat(x, y):
    """[R, 2C] of x then y ([R, C] each) along K."""
    R: tl.constexpr = x.shape[0]
    C: tl.constexpr = x.shape[1]
    return tl.reshape(tl.permute(tl.join(x, y), (0, 2, 1)), (R, 2 * C))


@triton.jit
def unpack_run(p, word, c):
    """int8 [R, 64]: the folded values of one run (p: uint8 [R, 32], its packed bytes; word:
    int32 [R], the rows' shift words; c: the run's index in its word's K step)."""
    R: tl.constexpr = p.shape[0]
    s0 = (word >> (4 * c)) & 3
    s1 = (word >> (4 * c + 2)) & 3
    if not _INTERPRETED:
        t0 = s0[:, None]
        t1 = s1[:, None]
        lo, hi = tl.inline_asm_elementwise(_UNPACK_ASM, "=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r",
                                           [p, 0x03020100 << t0, 0x0C080604 << t0, 0x03020100 << t1,
                                            0x0C080604 << t1], dtype=(tl.int8, tl.int8), is_pure=True, pack=4)
        return _cat(lo, hi)
    else:
        # The CPU interpreter has no PTX: the same values by integer operations.
        b = tl.permute(tl.reshape(p.to(tl.int32), (R, 8, 2, 2)), (0, 1, 3, 2))  # word, byte, block
        b0, b1 = tl.split(b)
        lo = _block_values(b0, s0[:, None, None])
        hi = _block_values(b1, s1[:, None, None])
        return _cat(lo, hi).to(tl.int8)


@triton.jit
def step_word(sh_ptr, rows, row_ok, K, k0, SB: tl.constexpr):
    """int32 [R]: the shift words of rows ``rows`` for the K step of SB elements holding k0."""
    return tl.load(sh_ptr + rows * tl.cdiv(K, SB) + k0 // SB, mask=row_ok, other=0)


@triton.jit
def _run_bytes(w_desc, w_ptr, row0, rows, row_ok, K, r, BY_DESC: tl.constexpr):
    """uint8 [R, 32]: run r's packed bytes in rows row0 + [0, R) through the tensor descriptor
    (zeros past the rows and past K), or in rows ``rows`` by pointer loads (zeros past row_ok
    and past K: a last step may reach past the last run)."""
    if BY_DESC:
        return w_desc.load([row0, r * 32])
    else:
        runs = tl.cdiv(K, RUN)
        cols = r * 32 + tl.arange(0, 32)
        return tl.load(w_ptr + rows[:, None] * (runs * 32) + cols[None, :], mask=row_ok[:, None] & (r < runs),
                       other=0)


@triton.jit
def _runs(w_desc, w_ptr, row0, rows, row_ok, K, r0, word, c0, NC: tl.constexpr, BY_DESC: tl.constexpr):
    """int8 [R, 64 * NC]: runs r0 .. r0 + NC - 1 unpacked (c0: run r0's index in the step of
    ``word``), joined along K as halves (NC a power of two)."""
    if NC == 1:
        w = unpack_run(_run_bytes(w_desc, w_ptr, row0, rows, row_ok, K, r0, BY_DESC), word, c0)
    else:
        H: tl.constexpr = NC // 2
        w = _cat(_runs(w_desc, w_ptr, row0, rows, row_ok, K, r0, word, c0, H, BY_DESC),
                 _runs(w_desc, w_ptr, row0, rows, row_ok, K, r0 + H, word, c0 + H, H, BY_DESC))
    return w


@triton.jit
def unpack_step(w_desc, sh_ptr, row0, rows, row_ok, K, k0, BK: tl.constexpr):
    """int8 [R, BK]: the packed weight's values in rows row0 + [0, R) and columns [k0, k0 + BK),
    one K step, through w_desc (a tensor descriptor over the codes with blocks [R, 32]; zeros
    past the rows and past K). BK is 64, 128, 256 or 512 (the words' step) and k0 a multiple
    of it."""
    word = step_word(sh_ptr, rows, row_ok, K, k0, BK)
    return _runs(w_desc, None, row0, rows, row_ok, K, k0 // RUN, word, 0, BK // RUN, True)


@triton.jit
def unpack_block(w_desc, w_ptr, sh_ptr, row0, rows, row_ok, K, b, SB: tl.constexpr, BY_DESC: tl.constexpr):
    """int8 [R, 32]: MX block b of the packed weight's rows (as :func:`_run_bytes` reads them;
    sh_ptr: shift words for K steps of SB elements)."""
    word = step_word(sh_ptr, rows, row_ok, K, b * 32, SB)
    run = unpack_run(_run_bytes(w_desc, w_ptr, row0, rows, row_ok, K, b // 2, BY_DESC), word, (b * 32 % SB) // RUN)
    lo, hi = tl.split(tl.permute(tl.reshape(run, (run.shape[0], 2, 32)), (0, 2, 1)))
    return tl.where(b % 2 == 0, lo, hi)


@triton.jit
def load_packed(w_ptr, sh_ptr, rows, row_ok, K, k0, k_hi, BK: tl.constexpr, SB: tl.constexpr):
    """int8 [R, BK]: the packed weight's values in rows ``rows`` and columns [k0, k0 + BK) by
    pointer loads, zeros past row_ok and past column k_hi (w_ptr: its codes; sh_ptr: its shift
    words for K steps of SB elements). BK is 32 (k0 a multiple of 32) or 64 .. SB (k0 a
    multiple of BK)."""
    if BK == 32:
        w = unpack_block(None, w_ptr, sh_ptr, 0, rows, row_ok, K, k0 // 32, SB, False)
    else:
        word = step_word(sh_ptr, rows, row_ok, K, k0, SB)
        w = _runs(None, w_ptr, 0, rows, row_ok, K, k0 // RUN, word, (k0 % SB) // RUN, BK // RUN, False)
    k = k0 + tl.arange(0, BK)
    return tl.where((k < k_hi)[None, :], w, 0)
