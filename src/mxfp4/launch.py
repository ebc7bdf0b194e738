"""Triton launches: each kernel's grid, arguments and buffers (split-K partials, the per-stream
counter workspace, the int8 fold launch and the folded weight). No validation: :mod:`mxfp4.ops`
checks the operands and picks the config."""
from __future__ import annotations

import torch

from .fold import Folded, PackedFold, folded_weight, segments
from .formats import ScaleRule
from .residency import (_WORKSPACE, interpreter_enabled, num_programs_cap, on_gpu, programmatic_launch,
                        resident_per_sm)
from .tensor import Layout, MXFP4Tensor
from .tuning import KernelConfig, pow2_at_least


def _quant_chunks(m: int, k: int, programs: int) -> tuple[int, int]:
    """Chunk shape (QM rows, QK columns) for phase 1: few enough chunks that each program does
    about one (one DRAM round trip), small enough to keep registers in bounds."""
    qm = pow2_at_least(min(m, 16))
    kpow = pow2_at_least(k)
    qk = 32
    while -(-m // qm) * -(-k // qk) > programs and qk < min(kpow, 512):
        qk *= 2
    while -(-m // qm) * -(-k // qk) > programs and qm * qk < 8192:
        qm *= 2
    return qm, qk


def _check_32bit(m: int, n: int, k: int, w: MXFP4Tensor) -> None:
    if max(m * k, m * n, n * k // 2, w.scales.numel()) >= 2 ** 31:
        raise ValueError(f"the Triton kernel indexes with 32-bit offsets: a [{m}, {k}], out [{m}, {n}] and "
                         f"w [{n}, {k}] must each have fewer than 2**31 elements (bytes for w); split the call")


def _split_k_buffers(dev: torch.device, tiles: int, split_k: int, tile_elems: int,
                     unused: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(counters, partials): the per-stream counter workspace (4 meeting slots, then one per
    tile), and a float32 buffer of ``tile_elems`` per split and tile, or ``unused`` when there
    is no split. A tile's counter holds its arrivals in 16 bits (``kernels.a4w4._store_tile``)."""
    if split_k >= 1 << 16:
        raise ValueError(f"split_k: at most 65535 splits of K (a tile's counter holds its arrivals in 16 bits), "
                         f"got {split_k}")
    cnt = _WORKSPACE.counters(dev, 4 + tiles)
    if split_k == 1:
        return cnt, unused
    return cnt, torch.empty(tiles * split_k * tile_elems, dtype=torch.float32, device=dev)


def plan_a4w4(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig
              ) -> tuple[tuple, tuple, dict]:
    """Grid, positional arguments and constexpr keywords of one launch of the Triton kernel."""
    m, k = a2.shape
    n = w.shape[0]
    _check_32bit(m, n, k, w)
    dev = a2.device
    blocks = k // 32
    split_k = max(1, min(config.split_k, blocks))
    per_split = -(-blocks // split_k)
    split_k = -(-blocks // per_split)
    n_tiles, m_tiles = -(-n // config.block_n), -(-m // config.block_m)
    work = n_tiles * m_tiles * split_k
    programs = max(1, min(work, num_programs_cap(dev)))
    qm, qk = _quant_chunks(m, k, programs)
    kq_chunks = -(-k // qk)
    q = torch.empty((m, k), dtype=torch.uint8, device=dev)
    qs = torch.empty((m, blocks), dtype=torch.float32, device=dev)
    cnt, part = _split_k_buffers(dev, n_tiles * m_tiles, split_k, config.block_m * config.block_n, q)
    args = (a2, a2.stride(0), a2.stride(1), w.data, w.scales, out2, out2.stride(0), out2.stride(1),
            q, qs, part, cnt, cnt[4:], m, n, k, w.scales.shape[1],
            n_tiles, m_tiles, split_k, per_split, -(-m // qm) * kq_chunks, kq_chunks)
    consts = dict(SHUFFLED=w.layout is Layout.AITER_SHUFFLED, FLOOR_RULE=w.scale_rule is ScaleRule.FLOOR,
                  BM=config.block_m, BN=config.block_n, QM=qm, QK=qk, USE_SPLIT=split_k > 1,
                  NBS=config.blocks_per_step, INTERPRET=interpreter_enabled(),
                  num_warps=config.num_warps, num_stages=config.num_stages)
    return (programs,), args, consts


def plan_direct(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig,
                write_q: bool = False) -> tuple[tuple, tuple, dict]:
    """Grid, positional arguments and constexpr keywords of one launch of the direct kernel."""
    m, k = a2.shape
    n = w.shape[0]
    _check_32bit(m, n, k, w)
    dev = a2.device
    blocks = k // 32
    nb = config.blocks_per_step
    split_k = max(1, min(config.split_k, -(-blocks // nb)))
    chunks = -(-blocks // (split_k * nb))  # chunks of nb blocks per program
    split_k = -(-blocks // (chunks * nb))
    n_tiles, m_tiles = -(-n // config.block_n), -(-m // config.block_m)
    q = torch.empty((m, k) if write_q else (1,), dtype=torch.uint8, device=dev)
    qs = torch.empty((m, blocks) if write_q else (1,), dtype=torch.float32, device=dev)
    cnt, part = _split_k_buffers(dev, n_tiles * m_tiles, split_k, config.block_m * config.block_n, qs)
    args = (a2, a2.stride(0), a2.stride(1), w.data, w.scales, out2, out2.stride(0), out2.stride(1),
            q, qs, part, cnt[4:], m, n, k, w.scales.shape[1], n_tiles, m_tiles, split_k, chunks)
    consts = dict(SHUFFLED=w.layout is Layout.AITER_SHUFFLED, FLOOR_RULE=w.scale_rule is ScaleRule.FLOOR,
                  BM=config.block_m, BN=config.block_n, NB=nb, BMQ=min(config.block_m, pow2_at_least(m)),
                  USE_SPLIT=split_k > 1, WRITE_Q=write_q,
                  INTERPRET=interpreter_enabled(), num_warps=config.num_warps, num_stages=config.num_stages)
    return (n_tiles * m_tiles * split_k,), args, consts


FOLD_ROWS = 16      # rows per program of the A fold launch (at most)
WIDE_FACTS = 8192   # int8_fused: A elements per program for the fold facts in one load (REST)
MEET_PER_SM = 2     # int8_meet: programs per SM at most, where they fit (two: 256x3072x1536 on 64 x 64
                    # tiles, 192 work items, 15.7 -> 12.3 us on the H200, ninth session run 14)
FOLD_ELEMS = 4096   # elements per load of the A fold launch
FOLD_BYTES = 32768  # bytes of A per program of the A fold launch (at most, unless one row is more)
GROUP_M = 8         # int8 kernel: M tiles side by side (W reuse in L2)
INT8_PDL = 2        # int8 (two launches): the multiply launched as a programmatic dependent of the A fold,
                    # which lets it start at the fold programs' start (1) or once each has folded (2); 0: no
                    # (H200: 2 faster than 0 on all six shapes tried, 384x4096x512 10.79 -> 9.75 us; 1 slower
                    # on the 1024-row ones; docs/results/s15/pdl-ab2-run3.txt, pdl-ab-large-run2.txt)
INT8_W_PF_PROGS = 64  # int8 (two launches, sm_90): programs added to the A fold's launch that ask for the first
INT8_W_PF_BYTES = 512  # min(INT8_W_PF_BYTES, half a segment) bytes of each folded weight row and segment in L2
                       # (kernels/prefetch.py); 0: none (H200: 14 layers at M = 64 .. 1024 geomean 11.17 -> 10.94
                       # us, 64x3072x1536 9.37 -> 8.91; docs/results/s17/wpf512-ab-run5.txt, *-run6.txt)
INT8_W_PF_SPLIT = 0  # ... also where K has several segments (split-K); 0: not (64x2112x7168 on 4 segments
                     # 17.1 -> 19.6 us with it: its prefetchers held the fold's launch to 4.5 us; s17 run 9)
INT8_W_PF_TOTAL = 4 << 20  # at most this many bytes prefetched in all (the largest measured, N = 7168 at 512
                           # bytes a row, is 3.7 MB; larger totals were not measured)
INT8_W_PF_DELAY = 500  # ns the prefetchers wait before they ask (so the fold's loads of A go out first), where
INT8_W_PF_DELAY_K = 1536  # K >= this and N <= INT8_W_PF_DELAY_N (H200, s18 runs 1-2 and s17 run 11: 20 of 23
INT8_W_PF_DELAY_N = 8192  # such layers faster, 0.03-0.48 us, 64x2880x2880 11.37 -> 10.96, three level; K = 512
                          # 0.03-0.31 us slower; N = 24576 0.4-0.7 us slower, its 64 prefetchers having 384 rows
                          # each; 800 ns slower than 500 on 8 of 10; docs/results/s18/delay*-run*.txt)
INT8_TMAP_PF = 1  # int8 / int8_meet (GPU): each program first asks for the A and W tensor maps (prefetch.tensormap)
                  # (H200, s18 run 10: 16 shapes 13.23 -> 13.16 us geomean, 11 faster by up to 0.29 us,
                  # 64x7168x2048 12.71 -> 12.50; five level; docs/results/s18/tmap-run10.txt)
INT8_PIECE_N = 128  # int8 kernel: column piece of the block-by-block path when the fold spans K
FUSED_SEGMENT_LOOP = 1  # int8_fused: a segment's facts from one load of all of it, then every step in one
                       # pipelined loop (kernels.fused._segment_loop), where that load fits WIDE_FACTS (H200:
                       # 12 K-loop shapes geomean 15.66 -> 15.59 us, 16x2112x7168 15.21 -> 14.44, then re-tuned;
                       # docs/results/s13/segloop-run8.txt)
FUSED_REDUCERS = 4  # int8_fused split-K: the last programs of a tile to arrive that share its sum, where its
FUSED_REDUCE_BYTES = 65536  # partials are this many bytes or more (_split_reducers; H200, docs/results/s14/)
FUSED_GRID3 = 1     # int8_fused: grid (N tiles, M tiles, segments), else one axis divided in the kernel (H200:
                    # the K = 512 benchmark shapes 0.07-0.16 us faster, docs/results/s12/grid3-run3.txt)


def _descriptor(t: torch.Tensor, rows: int, cols: int):
    """A TMA tensor descriptor over 2-D contiguous ``t`` with [rows, cols] blocks (reads past the
    end give zeros)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor.from_tensor(t, [rows, cols])


def _empty_fold(m: int, k: int, seg_blocks: int, dev: torch.device) -> Folded:
    """Uninitialized arrays of a fold of [m, k] for a launch to write."""
    segs = segments(k, seg_blocks)
    return Folded(torch.empty((m, k), dtype=torch.int8, device=dev),
                  torch.empty((m, k // 32), dtype=torch.float32, device=dev),
                  torch.empty((m, segs), dtype=torch.float32, device=dev),
                  torch.empty((m, segs), dtype=torch.int8, device=dev), seg_blocks)


def fold_a(a2: torch.Tensor, seg_blocks: int, scale_rule: ScaleRule, pdl: int = 0,
           prefetch_w: Folded | None = None) -> Folded:
    """Quantize 2-D a [M, K] and fold it (:mod:`mxfp4.fold`) with the Triton fold kernel; the
    result equals ``fold_tensor(quantize(a2), seg_blocks)`` bit for bit. ``pdl``: the next launch
    is a programmatic dependent that waits for this one (:func:`launch_int8`). ``prefetch_w`` (used
    with ``pdl`` only, which needs sm_90 as the prefetch does): a folded weight whose first bytes
    the launch's INT8_W_PF_PROGS extra programs ask for in L2 (:mod:`mxfp4.kernels.prefetch`)."""
    from .kernels.int8 import fold_a_kernel

    m, k = a2.shape
    segs = segments(k, seg_blocks)
    dev = a2.device
    f = _empty_fold(m, k, seg_blocks, dev)
    # Rows per program: at most FOLD_BYTES of A per program (its second read then finds the rows
    # in L2), and few enough that the GPU gets two programs per SM.
    rows = FOLD_ROWS
    while rows > 1 and (rows * min(k, seg_blocks * 32) * a2.element_size() > FOLD_BYTES
                        or -(-m // rows) * segs < 2 * num_programs_cap(dev)):
        rows //= 2
    n = 0 if prefetch_w is None or not pdl else prefetch_w.q.shape[0]
    pf_bytes = w_prefetch_bytes(n, seg_blocks, segs) if n else 0
    extra = dict(w_ptr=prefetch_w.q, N=n, pf_bytes=pf_bytes, PF_PROGS=INT8_W_PF_PROGS,
                 pf_delay=w_prefetch_delay(n, k)) if pf_bytes else {}
    fold_a_kernel[(-(-m // rows) + (INT8_W_PF_PROGS if pf_bytes else 0), segs)](
        a2, a2.stride(0), a2.stride(1), f.q, f.block_scale, f.seg_scale, f.folded, m, k, seg_blocks, segs,
        FLOOR_RULE=scale_rule is ScaleRule.FLOOR, PDL=pdl, **_fold_loads(rows, seg_blocks), **extra)
    return f


def w_prefetch_bytes(n: int, seg_blocks: int, segs: int) -> int:
    """Bytes of each row and segment of an [n, K] folded weight that the A fold's prefetchers ask
    for in L2 (0: no prefetchers): INT8_W_PF_BYTES, at most half a segment and INT8_W_PF_TOTAL in
    all (over every row and segment), a multiple of 16; 0 with several segments unless
    INT8_W_PF_SPLIT, or with no programs."""
    if INT8_W_PF_PROGS <= 0 or (segs > 1 and not INT8_W_PF_SPLIT):
        return 0
    return min(INT8_W_PF_BYTES, seg_blocks * 16, INT8_W_PF_TOTAL // max(1, n * segs)) // 16 * 16


def w_prefetch_delay(n: int, k: int) -> int:
    """Nanoseconds the A fold's weight prefetchers of an [n, k] weight wait before they ask
    (INT8_W_PF_DELAY where k >= INT8_W_PF_DELAY_K and n <= INT8_W_PF_DELAY_N, else 0)."""
    return INT8_W_PF_DELAY if k >= INT8_W_PF_DELAY_K and n <= INT8_W_PF_DELAY_N else 0


def _fold_loads(rows: int, seg_blocks: int) -> dict:
    """The A fold's constexprs for units of ``rows`` rows and one segment: rows (PM), MX blocks
    per load (CB, at most FOLD_ELEMS elements) and whether one load holds a segment (ONE_CHUNK:
    A is then read once, :func:`mxfp4.kernels.int8.fold_rows`)."""
    chunk = min(FOLD_ELEMS // (32 * rows), pow2_at_least(seg_blocks))
    return dict(PM=rows, CB=chunk, ONE_CHUNK=chunk >= seg_blocks)


def _weight_arrays(fw: Folded | PackedFold) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, shifts) of the folded weight as the int8 kernels read it: the packed codes and
    shift words, or the int8 values (then the shifts argument is unused and gets the fold flags)."""
    if isinstance(fw, PackedFold):
        return fw.codes, fw.shift
    return fw.q, fw.folded


def _packed_step(config: KernelConfig) -> int:
    """The packed weight's K step in blocks for :func:`mxfp4.fold.folded_weight` (0: int8)."""
    return config.blocks_per_step if config.packed else 0


def _segment_blocks(k: int, config: KernelConfig) -> int:
    """The int8 kernels' fold segment in MX blocks: with split-K one segment per split, each a
    whole number of K steps; else fold_blocks, or all of K."""
    blocks = k // 32
    if config.split_k > 1:
        per = -(-blocks // config.split_k)
        return -(-per // config.blocks_per_step) * config.blocks_per_step
    return config.fold_blocks or blocks


def _int8_shape(k: int, config: KernelConfig) -> tuple[int, int, int]:
    """(segment blocks, segments, MODE) of the int8 kernels' launch (see a4w4_int8_kernel)."""
    seg = _segment_blocks(k, config)
    segs = segments(k, seg)
    return seg, segs, 0 if segs == 1 else (2 if config.split_k > 1 else 1)


def _int8_tile_args(fa: Folded, fw: Folded | PackedFold, out2: torch.Tensor, config: KernelConfig, mode: int
                    ) -> tuple[tuple, dict, int]:
    """(arguments, constexpr keywords, work items) of :func:`mxfp4.kernels.int8.int8_tile`'s
    part of a launch: tensor descriptors, fold arrays, output, split-K buffers, sizes."""
    (m, k), n = fa.q.shape, fw.folded.shape[0]
    bm, bn, bk = config.block_m, config.block_n, 32 * config.blocks_per_step
    segs = fa.seg_scale.shape[1]
    fbn = min(bn, INT8_PIECE_N) if mode == 0 else bn
    tiles = -(-m // bm) * -(-n // bn)
    splits = segs if mode == 2 else 1
    cnt, part = _split_k_buffers(out2.device, tiles, splits, bm * bn, fa.block_scale)
    w_vals, w_shift = _weight_arrays(fw)
    # the packed codes go by runs of 32 bytes (two MX blocks), unpacked one run at a time
    args = (_descriptor(fa.q, bm, bk), _descriptor(w_vals, bn, 32 if config.packed else bk), _descriptor(fa.q, bm, 32),
            _descriptor(w_vals, fbn, 32),
            fa.block_scale, fa.seg_scale, fa.folded, fw.block_scale, fw.seg_scale, fw.folded, w_shift,
            out2, out2.stride(0), out2.stride(1), part, cnt[4:], m, n, k, fa.seg_blocks, segs)
    consts = dict(BM=bm, BN=bn, BK=bk, FBN=fbn, GROUP_M=GROUP_M, MODE=mode, PACKED=config.packed,
                  num_warps=config.num_warps, num_stages=config.num_stages)
    if INT8_TMAP_PF and on_gpu(out2.device):
        consts["TMAP_PF"] = True
    return args, consts, tiles * splits


def launch_int8(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig) -> Folded:
    """The int8 path: fold A (one launch), fold W (once per weight, cached), multiply (one launch).
    Returns the folded A. On a GPU (INT8_PDL) the multiply is launched as a programmatic
    dependent of the fold: its programs may start while the fold runs and wait in the kernel
    for the fold's end, so the second launch's start-up overlaps the first."""
    from .kernels.int8 import a4w4_int8_kernel

    m, k = a2.shape
    _check_32bit(m, w.shape[0], k, w)
    seg, _, mode = _int8_shape(k, config)
    fw = folded_weight(w, seg, _packed_step(config))  # before the fold: a first call's weight fold is a launch too
    pdl = INT8_PDL if programmatic_launch(a2.device) else 0
    fa = fold_a(a2, seg, w.scale_rule, pdl, None if config.packed else fw)
    args, consts, items = _int8_tile_args(fa, fw, out2, config, mode)
    a4w4_int8_kernel[(items,)](*args, **consts, PDL=pdl != 0, launch_pdl=pdl != 0)
    return fa


def launch_int8_meet(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig) -> Folded:
    """The int8 path in one persistent launch (:mod:`mxfp4.kernels.meet`): the programs fold A
    once, meet, then multiply; the weight is folded once per weight and cached. Returns the
    folded A. The grid is at most one program per SM, or MEET_PER_SM per SM where there are
    more work items than SMs and the driver says that many of the compiled kernel fit on an SM
    at once (:func:`_resident_per_sm`): the meeting needs every program resident."""
    from .kernels.meet import a4w4_meet_kernel

    m, k = a2.shape
    _check_32bit(m, w.shape[0], k, w)
    dev = a2.device
    seg, segs, mode = _int8_shape(k, config)
    fa = _empty_fold(m, k, seg, dev)
    fw = folded_weight(w, seg, _packed_step(config))
    args, consts, items = _int8_tile_args(fa, fw, out2, config, mode)
    cap = num_programs_cap(dev)
    rows = 1  # rows per fold unit: units of one row, or few enough for one unit per program
    while rows < FOLD_ROWS and -(-m // rows) * segs > cap:
        rows *= 2
    groups = -(-m // rows)
    sync = _WORKSPACE.counters(dev, 4)
    args = (*args, a2, a2.stride(0), a2.stride(1), fa.q, sync, groups)
    consts = dict(FLOOR_RULE=w.scale_rule is ScaleRule.FLOOR, INTERPRET=interpreter_enabled(),
                  **_fold_loads(rows, seg), **consts)
    per_sm = 1
    if items > cap and MEET_PER_SM > 1 and on_gpu(dev):
        key = (config, m, w.shape[0], k, a2.stride(), out2.stride(), a2.data_ptr() % 16, out2.data_ptr() % 16,
               w.scale_rule, dev.index)
        per_sm = min(MEET_PER_SM, resident_per_sm(a4w4_meet_kernel, args, consts, key))
    a4w4_meet_kernel[(min(per_sm * cap, max(items, groups * segs)),)](*args, **consts)
    return fa


def launch_int8_fused(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig,
                      debug: bool = False) -> Folded | None:
    """The one-launch int8 path: fold W (once per weight, cached), then one launch that folds A
    in each program and multiplies. With ``debug`` the launch also writes A's fold, returned
    (else None)."""
    from .kernels.fused import a4w4_fused_kernel

    m, k = a2.shape
    n = w.shape[0]
    _check_32bit(m, n, k, w)
    dev = a2.device
    seg, segs, _ = _int8_shape(k, config)
    fw = folded_weight(w, seg, _packed_step(config))
    w_vals, w_shift = _weight_arrays(fw)
    bm, bn = max(16, config.block_m), config.block_n  # the dot's rows: 16 at least
    bmq = min(config.block_m, pow2_at_least(m))  # A rows per program, each repeated bm / bmq times
    n_tiles, m_tiles = -(-n // bn), -(-m // bmq)
    tiles = m_tiles * n_tiles
    cnt, part = _split_k_buffers(dev, tiles, segs, bmq * bn, fw.seg_scale)  # a partial holds the BMQ real rows
    fa = _empty_fold(m, k, seg, dev) if debug else None
    targets = (fa.q, fa.block_scale, fa.seg_scale, fa.folded) if debug else (cnt,) * 4  # untouched unless debug
    rest = pow2_at_least(32 * (seg - config.blocks_per_step)) if seg > config.blocks_per_step else 0
    rest = rest if bmq * rest <= WIDE_FACTS else 0
    every = pow2_at_least(32 * seg) if seg > config.blocks_per_step else 0  # all of a segment in one load
    every = every if FUSED_SEGMENT_LOOP and bmq * every <= WIDE_FACTS else 0
    bk = 32 * config.blocks_per_step
    grid3 = bool(FUSED_GRID3) and m_tiles < 65536 and segs < 65536  # CUDA's limit on grid axes 1 and 2
    reducers = _split_reducers(segs, tiles, bmq, bn, dev)
    a4w4_fused_kernel[(n_tiles, m_tiles, segs) if grid3 else (tiles * segs,)](
        a2, a2.stride(0), a2.stride(1), w_vals, _descriptor(w_vals, bn, bk) if config.w_tma else None, w_shift,
        fw.block_scale, fw.seg_scale, fw.folded,
        out2, out2.stride(0), out2.stride(1), part, cnt[4:], *targets, m, n, k, seg, segs,
        BM=bm, BMQ=bmq, BN=bn, BK=bk, ONE_STEP=seg <= config.blocks_per_step,
        REST=0 if every else rest, ALL=every,
        FLOOR_RULE=w.scale_rule is ScaleRule.FLOOR, USE_SPLIT=segs > 1, WRITE_FOLD=debug, PACKED=config.packed,
        W_TMA=config.w_tma, GRID3=grid3, REDUCERS=reducers, num_warps=config.num_warps,
        num_stages=config.num_stages)
    return fa


def _split_reducers(segs: int, tiles: int, rows: int, cols: int, dev: torch.device) -> int:
    """How many of a tile's split-K programs sum its partials (``_store_tile``'s REDUCERS; a
    partial is rows x cols float32): one, unless the partials are FUSED_REDUCE_BYTES or more, then
    up to FUSED_REDUCERS, a power of two no larger than the splits that divides the rows. All but
    the last of them wait for the rest of their tile, so reducers x tiles must stay below the
    programs surely resident at once (one per SM), and the CPU interpreter, which runs programs
    one after another, gets 1."""
    if segs * rows * cols * 4 < FUSED_REDUCE_BYTES or not on_gpu(dev):
        return 1
    reducers = 1
    while (reducers * 2 <= min(FUSED_REDUCERS, segs) and rows % (reducers * 2) == 0
           and reducers * 2 * tiles < num_programs_cap(dev)):
        reducers *= 2
    return reducers


def launch_a4w4(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig,
                debug: bool = False) -> tuple[torch.Tensor, torch.Tensor] | Folded | None:
    """Launch the Triton kernel ``config.kernel`` on 2-D a [M, K] into out [M, N]; no validation.

    Returns the quantized A: e4m3 bytes [M, K] and block scales as float32 [M, K/32] (2**e; the
    float's exponent field is the e8m0 byte). The persistent kernel always writes them (its
    phase-1 scratch); the direct kernel only when ``debug`` (else the buffers are placeholders).
    The int8 and int8_meet kernels return their folded A (:class:`mxfp4.fold.Folded`) instead;
    the int8_fused kernel too when ``debug``, else None.
    """
    if config.kernel == "int8":
        return launch_int8(a2, w, out2, config)
    if config.kernel == "int8_fused":
        return launch_int8_fused(a2, w, out2, config, debug)
    if config.kernel == "int8_meet":
        return launch_int8_meet(a2, w, out2, config)
    if config.kernel == "direct":
        from .kernels.direct import a4w4_direct_kernel

        grid, args, consts = plan_direct(a2, w, out2, config, write_q=debug)
        a4w4_direct_kernel[grid](*args, **consts)
        return args[8], args[9]
    from .kernels.a4w4 import a4w4_kernel

    grid, args, consts = plan_a4w4(a2, w, out2, config)
    a4w4_kernel[grid](*args, **consts)
    return args[8], args[9]
