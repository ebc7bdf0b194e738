"""The int8 path in one persistent launch: fold A once, meet, multiply.

@triton.jit code only; the launcher is :func:`mxfp4.launch.launch_int8_meet`. The two-launch
int8 path (:mod:`mxfp4.kernels.int8`) paid a second launch (~3 us on the H200) until its
multiply became a programmatic dependent of the fold (fifteenth session; since then it beats
this kernel on every shape compared, and the table keeps this one for the one-launch
benchmark shapes and two layers); the one-launch kernel (``a4w4_fused_kernel``) folds
A in every program, N / BN times over, which is too dear from M = 64 up. Here a co-resident
grid (one program per SM, or two where they fit: :func:`mxfp4.launch.launch_int8_meet`) does
both in one launch:

1. The programs fold A's row groups, each once (:func:`mxfp4.kernels.int8.fold_rows`), and
   :func:`mxfp4.kernels.a4w4.meet`.
2. Each program walks its work items (a tile, and with split-K a segment), as the two-launch
   int8 kernel does (:func:`mxfp4.kernels.int8.int8_tile`), reading the folded A through TMA.

Measured on the H200 (docs/results/meet/): about as fast as the two plain launches at
M = 64 .. 256 (phase 1 and the meeting cost what the second launch did), 20-50 % slower at
M = 512; 0.6-2.0 us slower than the two launches with the dependent launch on 26 shapes at
M = 64 .. 1024 (docs/results/s15/meet-vs-int8-run3.txt). An L2
prefetch of the weight before phase 1 (``cp.async.bulk.prefetch``) was tried and removed: it
made every shape slower (64x7168x2048: 19.1 us prefetching all of it, 17.4 without), as the
weight's traffic queued ahead of A's fold loads.
"""
import triton
import triton.language as tl

from .a4w4 import meet
from .int8 import fold_rows, int8_tile
from .prefetch import prefetch_tensormaps, tensormap_asm

_MEET_TMAPS = tl.constexpr(tensormap_asm("a4w4_meet_kernel"))


@triton.jit
def _proxy_fence(x):
    """Order this thread's earlier generic-proxy memory accesses before later async-proxy ones
    (TMA), both ways: the folded A is written with plain stores and read through TMA."""
    tl.inline_asm_elementwise("fence.proxy.async.global;\nmov.u32 $0, 0;", "=r,r", [x], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def a4w4_meet_kernel(a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
                     wsh_ptr, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG,
                     a_ptr, stride_am, stride_ak, q_ptr, sync_ptr, ROW_GROUPS,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FBN: tl.constexpr,
                     GROUP_M: tl.constexpr, MODE: tl.constexpr, PACKED: tl.constexpr, PM: tl.constexpr,
                     CB: tl.constexpr, ONE_CHUNK: tl.constexpr, FLOOR_RULE: tl.constexpr, INTERPRET: tl.constexpr,
                     TMAP_PF: tl.constexpr = False):
    """C[M, N] (bf16) from bf16 A [M, K] and the folded weight in one launch (see the module).

    The first twenty-one arguments and BM .. PACKED are those of ``a4w4_int8_kernel``; the A fold's
    arrays (q_ptr, the same as a_desc's, and abs / ass / aok) are written here first, in
    ROW_GROUPS groups of PM rows per segment (CB blocks per load; ONE_CHUNK: one load holds a
    segment, :func:`mxfp4.kernels.int8.fold_rows`). The grid must be
    co-resident. Under the CPU interpreter programs
    run one after another, so program 0 folds all of A. TMAP_PF (GPU only): each program first
    asks for the tensor maps of a_desc and w_desc, as ``a4w4_int8_kernel`` does."""
    pid = tl.program_id(0)
    if TMAP_PF:
        prefetch_tensormaps(pid, _MEET_TMAPS)
    epoch = tl.load(sync_ptr, volatile=True)  # :func:`meet`'s epoch, read before the fold
    G = tl.num_programs(0)
    items = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    if MODE == 2:
        items = items * NSEG
    first = pid
    step = G
    if INTERPRET:
        first = tl.where(pid == 0, 0, ROW_GROUPS * NSEG)
        step = 1
    for unit in range(first, ROW_GROUPS * NSEG, step):
        fold_rows(a_ptr, stride_am, stride_ak, q_ptr, abs_ptr, ass_ptr, aok_ptr, (unit % ROW_GROUPS) * PM,
                  unit // ROW_GROUPS, M, K, SEG_BLOCKS, NSEG, PM, CB, FLOOR_RULE, ONE_CHUNK)
    if not INTERPRET:
        _proxy_fence(pid)
    meet(sync_ptr, epoch, INTERPRET)
    if not INTERPRET:
        _proxy_fence(pid)
    for item in range(pid, items, G):
        int8_tile(item, a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
                  wsh_ptr, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG, BM, BN, BK,
                  FBN, GROUP_M, MODE, PACKED)
