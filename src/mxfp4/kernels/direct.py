"""Direct W4A4 GEMM: every program quantizes the A rows it needs itself; no meeting, no scratch.

@triton.jit code only; the launcher is :mod:`mxfp4.ops`.

Where the persistent kernel (:mod:`mxfp4.kernels.a4w4`) quantizes A once and then makes every
program wait at a grid-wide meeting, this kernel puts one chain of memory round trips per
program: load the A rows (bf16), the weight bytes and their scales of its K range at once,
quantize A in registers, one batched fp8 dot over all the MX blocks of the range, scale, sum,
store (or hand the partial to the split-K reduce). A is quantized N / BN times over, so this
pays off when M * K is small against the weight: on the H200 the K = 512 benchmark shapes went
10.6 / 12.8 / 12.6 -> 7.1 / 10.1 / 9.6 us against the persistent kernel (BENCHMARKS.md).

Numerics are those of the persistent kernel: per MX block an exact fp8 dot (block sums need
13 bits), scaled by 2**(ea + eb + 12) in float32, then summed over the blocks.
"""
import triton
import triton.language as tl

from .a4w4 import _scale_offsets, _store_tile, fp4x2_to_fp8
from .numerics import _e8m0_to_f32, block_scales, pow2_f32, to_f32


@triton.jit
def round_to_e2m1(x, FLOOR_RULE: tl.constexpr):
    """Round x [B0, B1, 32] (any float dtype) to MXFP4 per 32-element block along the last axis.

    Returns (r, e, nonfinite): r float32 [B0, B1, 32], the e2m1 value times 2**-6 with x's sign
    (0 in a block holding NaN or Inf); e the blocks' scale exponents, int32 [B0, B1]; nonfinite
    [B0, B1].

    The rounding is float arithmetic, about 10 operations per element: v * 2**(-e-6) is exact
    (a power-of-two scaling; results too small to be exact round to 0 anyway), and adding then
    subtracting M = 2**(E + 22), E the exponent of that value (at least that of 2**-6), rounds
    it, to nearest even, to one mantissa bit from 2**-6 up and to multiples of 2**-7 below:
    exactly the e2m1 grid times 2**-6. Saturation at 6 and the non-finite case are an unsigned
    integer minimum on the float bits, so NaN never meets a float compare.
    """
    xf = to_f32(x)
    bits, _, e, nonfinite = block_scales(xf, FLOOR_RULE)
    return round_with_scales(xf, bits, e, nonfinite), e, nonfinite


@triton.jit
def round_with_scales(xf, bits, e, nonfinite):
    """The rounding of :func:`round_to_e2m1` with the blocks' scales known (:func:`block_scales`)."""
    p = -e - 6  # in [-133, 121]: 2**p is a float32 normal from -126 up, a subnormal below
    mult = pow2_f32(p)
    lim = tl.where(nonfinite, 0, 0x3DC00000).to(tl.uint32)  # bits of 6 * 2**-6; 0 empties a non-finite block
    sign = tl.where(nonfinite, 0, -0x80000000)
    xs = tl.abs(xf) * mult[:, :, None]
    magic = ((tl.maximum(xs.to(tl.int32, bitcast=True) & 0x7F800000, 121 << 23) + (22 << 23))
             .to(tl.float32, bitcast=True))
    r = (xs + magic) - magic
    # Unsigned: in a non-finite block r may be a NaN of either sign (inf - inf), and a negative
    # NaN's bits must also lose against lim; in a finite block r >= +0 and this is a plain min.
    rb = (tl.minimum(r.to(tl.uint32, bitcast=True), lim[:, :, None]).to(tl.int32, bitcast=True)
          | (bits & sign[:, :, None]))
    return rb.to(tl.float32, bitcast=True)


@triton.jit
def quantize_rows_fp8(x, NB: tl.constexpr, R: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """Quantize x [NB, R, 32] (any float dtype) per 32-element block along the last axis
    (:func:`round_to_e2m1`). Returns (e4m3 [NB, R, 32] holding the e2m1 value times 2**-6, e8m0
    scale bytes int32 [NB, R]); a block holding NaN or Inf gets codes 0 and scale byte 255."""
    r, e, nonfinite = round_to_e2m1(x, FLOOR_RULE)
    return r.to(tl.float8e4nv), tl.where(nonfinite, 255, e + 127)


@triton.jit
def _weight_offsets_3d(blk, offs_n, KB, SHUFFLED: tl.constexpr):
    """Byte offsets [NB, BN, 16] of the 16 packed bytes of MX block blk[b] of weight row n."""
    b = blk[:, None, None]
    n = offs_n[None, :, None]
    j = tl.arange(0, 16)[None, None, :]
    if SHUFFLED:  # (16, 16) tiles of 16 rows x 32 bytes, two 16-byte halves each
        return (n // 16) * (16 * KB) + (b // 2) * 512 + (b % 2) * 256 + (n % 16) * 16 + j
    else:
        return n * KB + b * 16 + j


@triton.jit
def a4w4_direct_kernel(
    a_ptr, stride_am, stride_ak,
    w_ptr, ws_ptr,
    c_ptr, stride_cm, stride_cn,
    q_ptr, qs_ptr, part_ptr, tile_cnt_ptr,
    M, N, K, SCOLS,
    N_TILES, M_TILES, SPLIT_K, CHUNKS,
    SHUFFLED: tl.constexpr, FLOOR_RULE: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, NB: tl.constexpr, BMQ: tl.constexpr,
    USE_SPLIT: tl.constexpr, WRITE_Q: tl.constexpr, INTERPRET: tl.constexpr,
):
    """C[M, N] (bf16) = quant(A)[M, K] @ W[N, K]^T; one program per (n tile, m tile, k split).

    A program covers CHUNKS x NB MX blocks of K; per chunk it loads A [NB, BMQ, 32] (bf16), the
    weight [NB, BN, 16] bytes and scales [NB, BN], quantizes A, and runs one batched fp8 dot
    [NB, BM, 32] x [NB, 32, BN] (A's rows repeated BM / BMQ times). WRITE_Q (tests): programs of the first n tile also write the
    quantized A to q_ptr / qs_ptr, as the persistent kernel's scratch holds it.
    """
    pid = tl.program_id(0)
    pid_n = pid % N_TILES
    rest = pid // N_TILES
    pid_m = rest % M_TILES
    pid_k = rest // M_TILES
    # BMQ (< BM only when M < BM) rows are loaded and quantized; each is repeated BM / BMQ times
    # to make the dot's BM rows (so no work goes into quantizing padding rows).
    REP: tl.constexpr = BM // BMQ
    offs_m = pid_m * BMQ + tl.arange(0, BMQ)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask_m = offs_m < M
    mask_n = offs_n < N
    KBLK = K // 32
    KB = K // 2
    jj = tl.arange(0, 32)[None, None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for c in range(CHUNKS):
        blk = (pid_k * CHUNKS + c) * NB + tl.arange(0, NB)
        in_k = blk < KBLK
        cols = blk[:, None, None] * 32 + jj                              # [NB, 1, 32]
        a_mask = in_k[:, None, None] & mask_m[None, :, None]
        x = tl.load(a_ptr + offs_m[None, :, None] * stride_am + cols * stride_ak, mask=a_mask, other=0.0)
        w_mask = in_k[:, None, None] & mask_n[None, :, None]
        w = tl.load(w_ptr + _weight_offsets_3d(blk, offs_n, KB, SHUFFLED), mask=w_mask, other=0)
        wsb = tl.load(ws_ptr + _scale_offsets(offs_n[None, :], blk[:, None], SCOLS, SHUFFLED),
                      mask=in_k[:, None] & mask_n[None, :], other=127).to(tl.int32)
        a8, sab = quantize_rows_fp8(x, NB, BMQ, FLOOR_RULE)             # [NB, BMQ, 32], [NB, BMQ]
        if WRITE_Q:
            if pid_n == 0:
                tl.store(q_ptr + offs_m[None, :, None] * K + cols, a8.to(tl.uint8, bitcast=True), mask=a_mask)
                tl.store(qs_ptr + offs_m[None, :] * KBLK + blk[:, None], _e8m0_to_f32(sab, 0),
                         mask=in_k[:, None] & mask_m[None, :])
        if REP > 1:
            a8 = tl.reshape(tl.broadcast_to(tl.reshape(a8, (NB, BMQ, 1, 32)), (NB, BMQ, REP, 32)), (NB, BM, 32))
            sab = tl.reshape(tl.broadcast_to(tl.reshape(sab, (NB, BMQ, 1)), (NB, BMQ, REP)), (NB, BM))
        w8 = tl.reshape(fp4x2_to_fp8(tl.reshape(w, (NB * BN, 16)), INTERPRET), (NB, BN, 32))
        p = tl.dot(a8, tl.permute(w8, (0, 2, 1)), out_dtype=tl.float32)  # [NB, BM, BN], exact per block
        s = _e8m0_to_f32(sab, 0)[:, :, None] * _e8m0_to_f32(wsb, 12)[:, None, :]
        acc += tl.sum(p * s, axis=0)
    _store_tile(acc, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, pid_n, pid_m, pid_k,
                N_TILES, SPLIT_K, BM, BN, USE_SPLIT, REP)
