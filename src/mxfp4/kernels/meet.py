"""The int8 path in one persistent launch: fold A once, meet, multiply.

@triton.jit code only; the launcher is :func:`mxfp4.launch.launch_int8_meet`. The two-launch
int8 path (:mod:`mxfp4.kernels.int8`) pays a second launch (~3 us on the H200) and waits for
the fold before it starts on the weight; the one-launch kernel (``a4w4_fused_kernel``) folds
A in every program, N / BN times over, which is too dear from M = 64 up. Here a co-resident
grid (at most one program per SM) does both in one launch:

0. Optionally, each program asks L2 for the first K steps of its work items' weight bytes
   (``cp.async.bulk.prefetch``, sm_90), so they stream in while A is folded.
1. The programs fold A's row groups, each once (:func:`mxfp4.kernels.int8.fold_rows`), and
   :func:`mxfp4.kernels.a4w4.meet`.
2. Each program walks its work items (a tile, and with split-K a segment), as the two-launch
   int8 kernel does (:func:`mxfp4.kernels.int8.int8_tile`), reading the folded A through TMA.
"""
import triton
import triton.language as tl

from .a4w4 import meet
from .int8 import fold_rows, int8_tile, tile_of


@triton.jit
def _proxy_fence(x):
    """Order this thread's earlier generic-proxy memory accesses before later async-proxy ones
    (TMA), both ways: the folded A is written with plain stores and read through TMA."""
    tl.inline_asm_elementwise("fence.proxy.async.global;\nmov.u32 $0, 0;", "=r,r", [x], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _prefetch_lines(ptrs):
    """Ask L2 for the lines holding ``ptrs``."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1];\nmov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _prefetch_weight(wq_ptr, wss_ptr, wok_ptr, item, M, N, K, SEG_BLOCKS, NSEG, BYTES,
                     BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr, MODE: tl.constexpr):
    """Ask L2 for the first BYTES weight bytes of work item ``item``'s segment in each of its BN
    rows (one bulk prefetch per row), and for the rows' segment factors and flags. Rows past N
    are clamped to the last (a hint: a repeated row costs nothing)."""
    pid_m, pid_n, split = tile_of(item, M, N, BM, BN, GROUP_M, MODE)
    cols = tl.minimum(pid_n * BN + tl.arange(0, BN), N - 1)
    b_lo = 0
    b_hi = K // 32
    if MODE == 2:
        b_lo = split * SEG_BLOCKS
        b_hi = tl.minimum(b_lo + SEG_BLOCKS, K // 32)
    size = tl.full((BN,), 0, tl.int32) + tl.minimum((b_hi - b_lo) * 32, BYTES)
    tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2;\nmov.u32 $0, 0;", "=r,l,r",
                              [wq_ptr + cols.to(tl.int64) * K + b_lo * 32, size], dtype=tl.int32,
                              is_pure=False, pack=1)
    _prefetch_lines(wss_ptr + cols * NSEG)
    _prefetch_lines(wok_ptr + cols * NSEG)


@triton.jit
def a4w4_meet_kernel(a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
                     c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG,
                     a_ptr, stride_am, stride_ak, q_ptr, wq_ptr, sync_ptr, ROW_GROUPS,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FBN: tl.constexpr,
                     GROUP_M: tl.constexpr, MODE: tl.constexpr, PM: tl.constexpr, CB: tl.constexpr,
                     FLOOR_RULE: tl.constexpr, PREFETCH: tl.constexpr, INTERPRET: tl.constexpr):
    """C[M, N] (bf16) from bf16 A [M, K] and the folded weight in one launch (see the module).

    The first twenty arguments and BM .. MODE are those of ``a4w4_int8_kernel``; the A fold's
    arrays (q_ptr, the same as a_desc's, and abs / ass / aok) are written here first, in
    ROW_GROUPS groups of PM rows per segment (CB blocks per load). wq_ptr: the folded weight's
    int8 values (w_desc's). The grid must be co-resident. PREFETCH: phase 0 (sm_90) over the
    first PREFETCH K steps of each item. Under the CPU interpreter programs run one after
    another, so program 0 folds all of A."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    items = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    if MODE == 2:
        items = items * NSEG
    if PREFETCH:
        for item in range(pid, items, G):
            _prefetch_weight(wq_ptr, wss_ptr, wok_ptr, item, M, N, K, SEG_BLOCKS, NSEG, PREFETCH * BK, BM, BN,
                             GROUP_M, MODE)
    first = pid
    step = G
    if INTERPRET:
        first = tl.where(pid == 0, 0, ROW_GROUPS * NSEG)
        step = 1
    for unit in range(first, ROW_GROUPS * NSEG, step):
        fold_rows(a_ptr, stride_am, stride_ak, q_ptr, abs_ptr, ass_ptr, aok_ptr, (unit % ROW_GROUPS) * PM,
                  unit // ROW_GROUPS, M, K, SEG_BLOCKS, NSEG, PM, CB, FLOOR_RULE)
    if not INTERPRET:
        _proxy_fence(pid)
    meet(sync_ptr, INTERPRET)
    if not INTERPRET:
        _proxy_fence(pid)
    for item in range(pid, items, G):
        int8_tile(item, a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
                  c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG, BM, BN, BK, FBN,
                  GROUP_M, MODE)
