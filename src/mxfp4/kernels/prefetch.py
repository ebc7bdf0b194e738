"""Ask for a weight's first columns in L2 from programs that have nothing else to load.

@triton.jit code only (GPU: inline PTX with no interpreter path; the launchers pass PF_ROWS = 0
there).
"""
import triton
import triton.language as tl


@triton.jit
def prefetch_rows_l2(w_ptr, row_lo, row_hi, row_bytes, pf_bytes, PF_ROWS: tl.constexpr, NT: tl.constexpr):
    """Ask for bytes [0, pf_bytes) of rows [row_lo, row_hi) of the row-major array at w_ptr
    (``row_bytes`` per row; both byte counts multiples of 16) in L2, as bulk prefetches
    (``cp.async.bulk.prefetch.L2``, which do not wait), PF_ROWS rows at a time. NT = 32 *
    num_warps elements, one per thread, so that no request is sent twice: each row goes in
    NT // PF_ROWS pieces (PF_ROWS a power of two <= NT)."""
    PIECES: tl.constexpr = NT // PF_ROWS
    e = tl.arange(0, NT)
    piece = (tl.cdiv(pf_bytes, PIECES * 16) * 16).to(tl.int64)
    lo = (e % PIECES) * piece
    size = tl.minimum(piece, pf_bytes - lo)
    for r0 in range(row_lo, row_hi, PF_ROWS):
        row = r0 + e // PIECES
        ok = (row < row_hi) & (size > 0)
        addr = (w_ptr + row.to(tl.int64) * row_bytes + lo).to(tl.int64, bitcast=True)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $3, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
            "=r,l,r,r", [addr, tl.where(ok, size, 16).to(tl.int32), ok.to(tl.int32)], dtype=tl.int32,
            is_pure=False, pack=1)


@triton.jit
def prefetch_part(w_ptr, rows, row_bytes, pf_bytes, part, parts, PF_ROWS: tl.constexpr, NT: tl.constexpr):
    """Part ``part`` of ``parts`` (equal runs of rows) of :func:`prefetch_rows_l2` over ``rows`` rows."""
    per = tl.cdiv(rows, parts)
    prefetch_rows_l2(w_ptr, part * per, tl.minimum(part * per + per, rows), row_bytes, pf_bytes, PF_ROWS, NT)
