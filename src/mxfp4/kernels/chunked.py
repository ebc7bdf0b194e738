"""Chunked W4A4 GEMM: A quantized once per launch (as in the persistent kernel), then each work
item multiplies NB MX blocks at a time with one batched fp8 dot (as in the direct kernel).

@triton.jit code only; the launcher is :mod:`mxfp4.ops`.

The persistent kernel steps one or two MX blocks at a time, and every step waits on its own
barriers and operand round trips; the direct kernel batches many blocks per dot but quantizes
A once per N tile. This one takes the better half of each: phase 1 quantizes A once into the
scratch, and phase 2 walks (item, chunk) steps in one flat loop, where a step multiplies NB
blocks at once. The weight bytes and scales of the next step are loaded while the current one
computes (the first step's before phase 1, so that DRAM round trip overlaps the quantization
and the meeting).

Numerics are those of the other kernels: an exact fp8 dot per MX block, scaled by
2**(ea + eb + 12) in float32, summed over the blocks.
"""
import triton
import triton.language as tl

from .a4w4 import _e8m0_to_f32, _store_tile, fp4x2_to_fp8, quantize_a_and_meet
from .direct import _scale_offsets_2d, _weight_offsets_3d


@triton.jit
def _step_coords(t, pid, G, N_TILES, M_TILES, CHUNKS):
    """(pid_n, pid_m, pid_k, chunk) of this program's flat step t."""
    item = pid + (t // CHUNKS) * G
    c = t % CHUNKS
    pid_n = item % N_TILES
    rest = item // N_TILES
    return pid_n, rest % M_TILES, rest // M_TILES, c


@triton.jit
def _load_w_step(w_ptr, ws_ptr, t, steps, pid, G, N, KB, KBLK, SCOLS, N_TILES, M_TILES, CHUNKS,
                 BN: tl.constexpr, NB: tl.constexpr, SHUFFLED: tl.constexpr):
    """Packed weight bytes [NB, BN, 16] and e8m0 bytes [NB, BN] (int32) of flat step t; nothing is
    read (zeros / 127) when t is past the last step."""
    pid_n, pid_m, pid_k, c = _step_coords(t, pid, G, N_TILES, M_TILES, CHUNKS)
    blk = (pid_k * CHUNKS + c) * NB + tl.arange(0, NB)
    offs_n = pid_n * BN + tl.arange(0, BN)
    ok = (blk < KBLK)[:, None] & (offs_n < N)[None, :] & (t < steps)
    w = tl.load(w_ptr + _weight_offsets_3d(blk, offs_n, KB, SHUFFLED), mask=ok[:, :, None], other=0)
    wsb = tl.load(ws_ptr + _scale_offsets_2d(blk, offs_n, SCOLS, SHUFFLED), mask=ok, other=127).to(tl.int32)
    return w, wsb


@triton.jit
def a4w4_chunked_kernel(
    a_ptr, stride_am, stride_ak,
    w_ptr, ws_ptr,
    c_ptr, stride_cm, stride_cn,
    q_ptr, qs_ptr, part_ptr, sync_ptr, tile_cnt_ptr,
    M, N, K, SCOLS,
    N_TILES, M_TILES, SPLIT_K, CHUNKS, Q_CHUNKS, KQ_CHUNKS,
    SHUFFLED: tl.constexpr, FLOOR_RULE: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, NB: tl.constexpr, QM: tl.constexpr, QK: tl.constexpr,
    USE_SPLIT: tl.constexpr, INTERPRET: tl.constexpr,
):
    """C[M, N] (bf16) = quant(A)[M, K] @ W[N, K]^T in one persistent launch.

    Work items (n tile, m tile, k split) go round-robin to the programs; an item is CHUNKS
    chunks of NB MX blocks. Program pid's flat step t is chunk t % CHUNKS of its item t // CHUNKS.
    """
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    total = N_TILES * M_TILES * SPLIT_K
    steps = tl.maximum(total - pid + G - 1, 0) // G * CHUNKS
    KBLK = K // 32
    KB = K // 2

    w_nx, wsb_nx = _load_w_step(w_ptr, ws_ptr, 0, steps, pid, G, N, KB, KBLK, SCOLS, N_TILES, M_TILES, CHUNKS,
                                BN, NB, SHUFFLED)
    quantize_a_and_meet(a_ptr, stride_am, stride_ak, q_ptr, qs_ptr, sync_ptr, M, K, Q_CHUNKS, KQ_CHUNKS,
                        QM, QK, FLOOR_RULE, INTERPRET)

    jj = tl.arange(0, 32)[None, None, :]
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for t in range(0, steps):
        pid_n, pid_m, pid_k, c = _step_coords(t, pid, G, N_TILES, M_TILES, CHUNKS)
        w = w_nx
        wsb = wsb_nx
        w_nx, wsb_nx = _load_w_step(w_ptr, ws_ptr, t + 1, steps, pid, G, N, KB, KBLK, SCOLS, N_TILES, M_TILES,
                                    CHUNKS, BN, NB, SHUFFLED)
        blk = (pid_k * CHUNKS + c) * NB + tl.arange(0, NB)
        offs_m = pid_m * BM + tl.arange(0, BM)
        ok = (blk < KBLK)[:, None] & (offs_m < M)[None, :]
        a8 = tl.load(q_ptr + offs_m[None, :, None] * K + blk[:, None, None] * 32 + jj, mask=ok[:, :, None],
                     other=0).to(tl.float8e4nv, bitcast=True)
        sa = tl.load(qs_ptr + offs_m[None, :] * KBLK + blk[:, None], mask=ok, other=0.0)
        w8 = tl.reshape(fp4x2_to_fp8(tl.reshape(w, (NB * BN, 16)), INTERPRET), (NB, BN, 32))
        # W^T A^T: the weight, the larger operand, goes in as the dot's first operand, K-major as
        # it was expanded; only A's tile is transposed on its way to shared memory.
        p = tl.dot(w8, tl.permute(a8, (0, 2, 1)), out_dtype=tl.float32)  # [NB, BN, BM], exact per block
        acc += tl.sum(p * (_e8m0_to_f32(wsb, 12)[:, :, None] * sa[:, None, :]), axis=0)
        if c == CHUNKS - 1:
            _store_tile(tl.trans(acc), c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, pid_n, pid_m, pid_k,
                        N_TILES, SPLIT_K, BM, BN, USE_SPLIT)
            acc = tl.zeros((BN, BM), dtype=tl.float32)
