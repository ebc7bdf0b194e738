"""Large-M W4A4 GEMM on int8 tensor cores, exact, through the int8 fold (:mod:`mxfp4.fold`).

@triton.jit code only; the launchers are in :mod:`mxfp4.launch`. Two launches per call, on a
GPU the second a programmatic dependent of the first (PDL: its programs may start before the
fold's launch ends and wait in the kernel for it, which hides most of a launch's ~3 us;
H200, fifteenth session, docs/results/s15/):

1. ``fold_a_kernel`` quantizes bf16 A per 1x32 block (the same rule, bit for bit, as
   :func:`mxfp4.quantize`) and writes it in the fold's form: int8 values, per-block and
   per-segment float32 factors, and a per-segment "folded" flag. A program takes PM rows of one
   segment; where the segment fits one load it reads them once and takes the block exponents
   (the segment's reference R and spread) and the quantized values (the direct kernel's float
   rounding, ~12 operations per element) from the same registers; else it reads them twice, the
   second time from L2 (a program holds at most 32 KB of A). Reading once saved 0-0.75 us per
   call on the H200 (seventh session, docs/results/s7/onechunk-ab-run2-*.log). The launch may
   also hold programs that only ask for the weight's first bytes in L2 (:mod:`.prefetch`).
2. ``a4w4_int8_kernel`` multiplies the folded A with the folded weight (prepared once per
   weight, :func:`mxfp4.fold.folded_weight`); with split-K each program takes one segment and
   the last program of a tile sums them in order. Per output tile and segment: if every row of the
   A tile and every row of the W tile is folded there, the segment is a plain int8 matmul
   accumulated exactly in int32 and scaled once per element, ``d * (fa[m] * fw[n])``; otherwise
   the segment goes block by block (one K=32 int8 dot per block, exact, each scaled by its
   blocks' factors), which is exact for any data but slower. The int8 matmul runs before the
   fold flags are looked at, so its first loads go out with theirs rather than a memory round
   trip later; a segment that does not fold pays for the unused matmul (H200, sixth session:
   the GEMM launch alone 12.6 -> 11.3 us on 64x7168x2048, together with the hardware bf16
   rounding of the epilogue; docs/results/s6/breakdown-run*.txt).

Numerics: the int32 sums are exact. A segment's sum is converted to float32 once (exact below
2**24, else one rounding to float32), times two powers of two, and segments add in float32:
the error is at most float32 summation's, inside the project's bound. The two factors are
multiplied first (as the other kernels multiply the two block scales), so a product is exact
while ``fa * fw`` stays within float32 (2**-149 .. 2**127); beyond that, both operands' blocks
are near the ends of the float32 range and the result is Inf / NaN or loses its low bits.
"""
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from .a4w4 import _store_tile
from .foldmath import _fold_rule, _fold_scaled, _fold_values, _merge_facts, _merge_scales, _no_facts, _scales
from .numerics import f32_to_bf16_rne, pow2_f32
from .packed import unpack_block, unpack_step
from .prefetch import prefetch_tensormaps, prefetch_w_rows, tensormap_asm, wait_ns

_INT8_TMAPS = tl.constexpr(tensormap_asm("a4w4_int8_kernel"))


@triton.jit
def _load_rows(ptr, rows, row_ok, stride_r, stride_k, k0, k_hi, BK: tl.constexpr):
    """ptr[rows, k0 : k0 + BK], zeros past row_ok and past column k_hi."""
    k = k0 + tl.arange(0, BK)
    return tl.load(ptr + rows[:, None] * stride_r + k[None, :] * stride_k,
                   mask=row_ok[:, None] & (k < k_hi)[None, :], other=0)


@triton.jit
def _segment_facts(a_ptr, stride_am, stride_ak, rows, row_ok, k_lo, k_hi, hi, lo, nan,
                   PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """The running facts (:func:`_merge_facts`) continued over A's columns [k_lo, k_hi)."""
    for k0 in range(k_lo, k_hi, CB * 32):
        x = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, k0, k_hi, CB * 32)
        hi, lo, nan = _merge_facts(x, hi, lo, nan, PM, CB, FLOOR_RULE)
    return hi, lo, nan


@triton.jit
def _store_fold(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, rows, row_ok, K, b_lo, b_hi, seg,
                NSEG, folded, ref, nan, PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """Write the fold of A's rows over blocks [b_lo, b_hi) (segment ``seg``, facts known):
    mxfp4.fold's arrays q int8 [M, K], block factors [M, K/32], segment factors and flags
    [M, NSEG]."""
    for b0 in range(b_lo, b_hi, CB):
        x = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, b0 * 32, b_hi * 32, CB * 32)
        q, factor = _fold_values(x, folded, ref, PM, CB, FLOOR_RULE)
        _store_chunk(q, factor, q_ptr, bs_ptr, rows, row_ok, K, b0, b_hi, CB)
    _store_seg(ss_ptr, ok_ptr, rows, row_ok, seg, NSEG, folded, ref, nan)


@triton.jit
def _store_chunk(q, factor, q_ptr, bs_ptr, rows, row_ok, K, b0, b_hi, CB: tl.constexpr):
    """Write folded values q [PM, CB * 32] and block factors [PM, CB] of blocks b0 .. b0 + CB - 1
    (those below b_hi) into the fold's arrays q int8 [M, K] and block factors [M, K/32]."""
    k = b0 * 32 + tl.arange(0, CB * 32)
    tl.store(q_ptr + rows[:, None] * K + k[None, :], q.to(tl.int8), mask=row_ok[:, None] & (k < b_hi * 32)[None, :])
    b = b0 + tl.arange(0, CB)
    tl.store(bs_ptr + rows[:, None] * (K // 32) + b[None, :], factor, mask=row_ok[:, None] & (b < b_hi)[None, :])


@triton.jit
def _store_seg(ss_ptr, ok_ptr, rows, row_ok, seg, NSEG, folded, ref, nan):
    """Write a segment's factors and fold flags [M, NSEG] for rows ``rows``."""
    tl.store(ss_ptr + rows * NSEG + seg, seg_factor(ref, nan), mask=row_ok)
    tl.store(ok_ptr + rows * NSEG + seg, folded.to(tl.int8), mask=row_ok)


@triton.jit
def fold_rows(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, row0, seg, M, K, SEG_BLOCKS, NSEG,
              PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr, ONE_CHUNK: tl.constexpr):
    """Quantize and fold rows row0 .. row0 + PM - 1 of A over segment ``seg`` into mxfp4.fold's
    arrays (q int8 [M, K], block factors [M, K/32], segment factors and flags [M, NSEG]).
    ONE_CHUNK (CB >= SEG_BLOCKS): the segment comes in one load, and its facts and its fold are
    computed from the same registers (no second read of A)."""
    rows = row0 + tl.arange(0, PM)
    row_ok = rows < M
    b_lo = seg * SEG_BLOCKS
    b_hi = tl.minimum(b_lo + SEG_BLOCKS, K // 32)
    hi, lo, nan = _no_facts(PM)
    if ONE_CHUNK:
        x = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, b_lo * 32, b_hi * 32, CB * 32)
        xf, bits, amax, e, nonfinite = _scales(x, PM, CB, FLOOR_RULE)
        hi, lo, nan = _merge_scales(amax, e, nonfinite, hi, lo, nan)
        folded, ref = _fold_rule(hi, lo)
        q, factor = _fold_scaled(xf, bits, e, nonfinite, folded, ref, PM, CB)
        _store_chunk(q, factor, q_ptr, bs_ptr, rows, row_ok, K, b_lo, b_hi, CB)
        _store_seg(ss_ptr, ok_ptr, rows, row_ok, seg, NSEG, folded, ref, nan)
    else:
        hi, lo, nan = _segment_facts(a_ptr, stride_am, stride_ak, rows, row_ok, b_lo * 32, b_hi * 32, hi, lo, nan,
                                     PM, CB, FLOOR_RULE)
        folded, ref = _fold_rule(hi, lo)
        _store_fold(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, rows, row_ok, K, b_lo, b_hi, seg,
                    NSEG, folded, ref, nan, PM, CB, FLOOR_RULE)


@triton.jit
def fold_a_kernel(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, M, K, SEG_BLOCKS, NSEG,
                  PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr, ONE_CHUNK: tl.constexpr,
                  PDL: tl.constexpr = 0, w_ptr=None, N=0, pf_bytes=0, PF_PROGS: tl.constexpr = 0, pf_delay=0):
    """Quantize and fold rows pid(0) * PM .. + PM of A over segment pid(1) (:func:`fold_rows`).
    PDL 1 / 2: let the next launch of the stream start (if it was launched as a programmatic
    dependent: ``a4w4_int8_kernel`` with PDL, which waits for this launch's end before it reads)
    at this program's start / once it has folded its rows; 0: nothing. PF_PROGS > 0: the last
    PF_PROGS programs of axis 0 fold nothing; at pid(1) 0 they let the next launch start, then ask
    for the first pf_bytes of each segment of the folded weight w_ptr [N, K] in L2
    (:func:`mxfp4.kernels.prefetch.prefetch_w_rows`), pf_delay ns after they start."""
    if PF_PROGS > 0:
        part = tl.program_id(0) - (tl.num_programs(0) - PF_PROGS)
        if part >= 0:
            if PDL != 0:
                gdc_launch_dependents()
            if tl.program_id(1) == 0:
                wait_ns(pf_delay)
                prefetch_w_rows(w_ptr, N, K, SEG_BLOCKS * 32, NSEG, pf_bytes, part, PF_PROGS, 128)
        else:
            _fold_program(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, M, K, SEG_BLOCKS, NSEG, PM,
                          CB, FLOOR_RULE, ONE_CHUNK, PDL)
    else:
        _fold_program(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, M, K, SEG_BLOCKS, NSEG, PM, CB,
                      FLOOR_RULE, ONE_CHUNK, PDL)


@triton.jit
def _fold_program(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, M, K, SEG_BLOCKS, NSEG,
                  PM: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr, ONE_CHUNK: tl.constexpr,
                  PDL: tl.constexpr):
    """A fold program of :func:`fold_a_kernel`."""
    if PDL == 1:
        gdc_launch_dependents()
    fold_rows(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, tl.program_id(0) * PM, tl.program_id(1),
              M, K, SEG_BLOCKS, NSEG, PM, CB, FLOOR_RULE, ONE_CHUNK)
    if PDL == 2:
        gdc_launch_dependents()


@triton.jit
def _load_tile_facts(aok_ptr, ass_ptr, wok_ptr, wss_ptr, offs_m, offs_n, mask_m, mask_n, seg, NSEG):
    """(fa, fw, ok_a, ok_w): the segment factors and fold flags of the A tile's and the W tile's
    rows over segment ``seg``, loaded together (one memory round trip; :func:`_both_fold`)."""
    fa = tl.load(ass_ptr + offs_m * NSEG + seg, mask=mask_m, other=0.0)
    fw = tl.load(wss_ptr + offs_n * NSEG + seg, mask=mask_n, other=0.0)
    ok_a = tl.load(aok_ptr + offs_m * NSEG + seg, mask=mask_m, other=1)
    ok_w = tl.load(wok_ptr + offs_n * NSEG + seg, mask=mask_n, other=1)
    return fa, fw, ok_a, ok_w


@triton.jit
def all_fold(factor, ok):
    """1 if every row of a tile folds (flags ``ok``, segment factors ``factor``), else 0 (int32).
    A factor is never negative (a power of two or NaN); were it, the tile would go the exact
    block-by-block way."""
    return tl.min(tl.where(factor < 0.0, 0, ok.to(tl.int32)))


@triton.jit
def _both_fold(fa, fw, ok_a, ok_w):
    """Whether every row of the A tile and of the W tile folds (:func:`_load_tile_facts`)."""
    return all_fold(fa, ok_a) * all_fold(fw, ok_w) != 0


@triton.jit
def seg_factor(ref, nan):
    """A folded segment's factor 2**(R - 4), NaN where the segment holds a non-finite block."""
    return tl.where(nan != 0, float("nan"), pow2_f32(ref - 4))


@triton.jit
def _int8_sum(a_desc, w_desc, wsh_ptr, row0, col0, offs_n, mask_n, K, k_lo, k_hi, BM: tl.constexpr,
              BN: tl.constexpr, BK: tl.constexpr, PACKED: tl.constexpr):
    """int32 [BM, BN]: sum over K in [k_lo, k_hi) of folded A times folded W (exact). The tensor
    descriptors' loads read zeros past K, M and N. PACKED: the weight tile is unpacked in
    registers as the product's left operand (``W x A^T``, wgmma's register operand;
    :mod:`mxfp4.kernels.packed`), and the sum is transposed at the end (a renaming)."""
    if PACKED:
        dt = tl.zeros((BN, BM), tl.int32)
        for k0 in range(k_lo, k_hi, BK):
            w = unpack_step(w_desc, wsh_ptr, col0, offs_n, mask_n, K, k0, BK)
            dt = tl.dot(w, tl.trans(a_desc.load([row0, k0])), dt, out_dtype=tl.int32)
        return tl.trans(dt)
    else:
        d = tl.zeros((BM, BN), tl.int32)
        for k0 in range(k_lo, k_hi, BK):
            d = tl.dot(a_desc.load([row0, k0]), tl.trans(w_desc.load([col0, k0])), d, out_dtype=tl.int32)
        return d


@triton.jit
def _blockwise(acc, a32_desc, w32_desc, abs_ptr, wbs_ptr, wsh_ptr, row0, col0, offs_m, offs_n, mask_m, mask_n,
               b_lo, b_hi, KB, BK: tl.constexpr, PACKED: tl.constexpr):
    """acc plus blocks [b_lo, b_hi) one by one: each block's exact int32 dot times its own two
    block factors (any data; the path of segments that do not fold). PACKED: w32_desc is over
    the packed codes with blocks of one run (32 bytes) and wsh_ptr holds shift words for K
    steps of BK."""
    for b in range(b_lo, b_hi):
        if PACKED:
            w = unpack_block(w32_desc, None, wsh_ptr, col0, offs_n, mask_n, KB * 32, b, BK, True)
        else:
            w = w32_desc.load([col0, b * 32])
        d = tl.dot(a32_desc.load([row0, b * 32]), tl.trans(w), out_dtype=tl.int32)
        fa = tl.load(abs_ptr + offs_m * KB + b, mask=mask_m, other=0.0)
        fw = tl.load(wbs_ptr + offs_n * KB + b, mask=mask_n, other=0.0)
        acc += d.to(tl.float32) * (fa[:, None] * fw[None, :])
    return acc


@triton.jit
def _add_segment(acc, a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
                 wsh_ptr, row0, col0, offs_m, offs_n, mask_m, mask_n, seg, KB, SEG_BLOCKS, NSEG,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PACKED: tl.constexpr):
    """acc plus segment ``seg``'s contribution to the tile: one int8 matmul scaled once where
    both tiles fold there, else block by block (the matmul is computed either way, so that its
    loads need not wait for the flags')."""
    b_lo = seg * SEG_BLOCKS
    b_hi = tl.minimum(b_lo + SEG_BLOCKS, KB)
    fa, fw, ok_a, ok_w = _load_tile_facts(aok_ptr, ass_ptr, wok_ptr, wss_ptr, offs_m, offs_n, mask_m, mask_n, seg,
                                          NSEG)
    d = _int8_sum(a_desc, w_desc, wsh_ptr, row0, col0, offs_n, mask_n, KB * 32, b_lo * 32, b_hi * 32, BM, BN, BK,
                  PACKED)
    if _both_fold(fa, fw, ok_a, ok_w):
        acc += d.to(tl.float32) * (fa[:, None] * fw[None, :])
    else:
        acc = _blockwise(acc, a32_desc, w32_desc, abs_ptr, wbs_ptr, wsh_ptr, row0, col0, offs_m, offs_n, mask_m,
                         mask_n, b_lo, b_hi, KB, BK, PACKED)
    return acc


@triton.jit
def _tile_of(item, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr, MODE: tl.constexpr):
    """(pid_m, pid_n, split) of work item ``item``: tiles in GROUP_M rows of M tiles side by side
    (neighbouring items share W in L2), then (MODE 2, split-K) the segment; split 0 otherwise."""
    m_tiles = tl.cdiv(M, BM)
    n_tiles = tl.cdiv(N, BN)
    tile = item
    split = 0
    if MODE == 2:
        tile = item % (m_tiles * n_tiles)
        split = item // (m_tiles * n_tiles)
    per_group = GROUP_M * n_tiles
    first_m = (tile // per_group) * GROUP_M
    group_m = tl.minimum(m_tiles - first_m, GROUP_M)
    return first_m + (tile % per_group) % group_m, (tile % per_group) // group_m, split


@triton.jit
def int8_tile(item, a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
              wsh_ptr, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FBN: tl.constexpr,
              GROUP_M: tl.constexpr, MODE: tl.constexpr, PACKED: tl.constexpr):
    """Work item ``item`` of :func:`a4w4_int8_kernel` (a tile, and with MODE 2 a segment)."""
    pid_m, pid_n, split = _tile_of(item, M, N, BM, BN, GROUP_M, MODE)
    n_tiles = tl.cdiv(N, BN)
    row0 = pid_m * BM
    col0 = pid_n * BN
    offs_m = row0 + tl.arange(0, BM)
    offs_n = col0 + tl.arange(0, BN)
    mask_m = offs_m < M
    mask_n = offs_n < N
    KB = K // 32
    if MODE == 0:
        fa, fw, ok_a, ok_w = _load_tile_facts(aok_ptr, ass_ptr, wok_ptr, wss_ptr, offs_m, offs_n, mask_m, mask_n, 0, 1)
        d = _int8_sum(a_desc, w_desc, wsh_ptr, row0, col0, offs_n, mask_n, K, 0, K, BM, BN, BK, PACKED)
        if _both_fold(fa, fw, ok_a, ok_w):
            tile_f32 = d.to(tl.float32) * (fa[:, None] * fw[None, :])
            tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, f32_to_bf16_rne(tile_f32),
                     mask=mask_m[:, None] & mask_n[None, :])
        else:
            for piece in tl.static_range(BN // FBN):
                cols = col0 + piece * FBN + tl.arange(0, FBN)
                part = _blockwise(tl.zeros((BM, FBN), tl.float32), a32_desc, w32_desc, abs_ptr, wbs_ptr, wsh_ptr,
                                  row0, col0 + piece * FBN, offs_m, cols, mask_m, cols < N, 0, KB, KB, BK, PACKED)
                tl.store(c_ptr + offs_m[:, None] * stride_cm + cols[None, :] * stride_cn, f32_to_bf16_rne(part),
                         mask=mask_m[:, None] & (cols < N)[None, :])
    elif MODE == 1:
        acc = tl.zeros((BM, BN), tl.float32)
        for seg in range(NSEG):
            acc = _add_segment(acc, a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr,
                               wok_ptr, wsh_ptr, row0, col0, offs_m, offs_n, mask_m, mask_n, seg, KB, SEG_BLOCKS, NSEG,
                               BM, BN, BK, PACKED)
        _store_tile(acc, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, pid_n, pid_m, 0, n_tiles, 1,
                    BM, BN, False)
    else:
        acc = _add_segment(tl.zeros((BM, BN), tl.float32), a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr,
                           aok_ptr, wbs_ptr, wss_ptr, wok_ptr, wsh_ptr, row0, col0, offs_m, offs_n, mask_m, mask_n,
                           split, KB, SEG_BLOCKS, NSEG, BM, BN, BK, PACKED)
        _store_tile(acc, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, pid_n, pid_m,
                    split, n_tiles, NSEG, BM, BN, True)


@triton.jit
def a4w4_int8_kernel(a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr, wok_ptr,
                     wsh_ptr, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FBN: tl.constexpr,
                     GROUP_M: tl.constexpr, MODE: tl.constexpr, PACKED: tl.constexpr, PDL: tl.constexpr = False,
                     TMAP_PF: tl.constexpr = False):
    """C[M, N] (bf16) from folded A [M, K] and folded W [N, K] (tensor descriptors with blocks
    [BM, BK] / [BN, BK], and [BM, 32] / [FBN, 32] for the block-by-block path). GROUP_M tiles of
    M side by side, so neighbouring programs share W in L2.

    MODE 0 (one segment, all of K; one program per tile): a tile is one int8 matmul scaled once,
    or block by block in column pieces of FBN (so that path needs no more registers than the
    other). MODE 1 (NSEG segments; one program per tile): the float32 accumulator lives across
    the segments (FBN == BN). MODE 2 (split-K; one program per tile and segment): each program
    adds its segment and the last of a tile to arrive sums the partials in segment order
    (bitwise deterministic; FBN == BN).

    PACKED: the weight is :class:`mxfp4.fold.PackedFold` for K steps of BK (w_desc / w32_desc
    over its codes with blocks of one run, [BN, 32] / [FBN, 32] bytes, wsh_ptr its shift words),
    else :class:`mxfp4.fold.Folded` (wsh_ptr unused).

    PDL: launched as a programmatic dependent of the A fold's launch (it may start while the
    fold runs), so every program first waits for that launch to end and its writes to show.

    TMAP_PF (GPU only): each program first asks for the tensor maps of a_desc and w_desc, so that
    its first TMA loads need not fetch them (:func:`mxfp4.kernels.prefetch.prefetch_tensormaps`)."""
    if TMAP_PF:
        prefetch_tensormaps(tl.program_id(0), _INT8_TMAPS)
    if PDL:
        gdc_wait()
    int8_tile(tl.program_id(0), a_desc, w_desc, a32_desc, w32_desc, abs_ptr, ass_ptr, aok_ptr, wbs_ptr, wss_ptr,
              wok_ptr, wsh_ptr, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG, BM, BN,
              BK, FBN, GROUP_M, MODE, PACKED)
