"""The int8 path in one launch for small M: each program folds the A rows it needs itself.

@triton.jit code only; the launcher is :func:`mxfp4.launch.launch_int8_fused`. The fold and the
int8 dot are those of :mod:`mxfp4.kernels.int8` (same rule, bit for bit); A is quantized N / BN
times over, so this kernel pays where M * K is small (the K = 512 benchmark shapes, decode).
"""
import triton
import triton.language as tl

from .a4w4 import _store_tile
from .direct import round_with_scales
from .foldmath import (_fold_rounded, _fold_rule, _fold_scaled, _fold_values, _merge_facts, _merge_scales,
                       _no_facts, _scales)
from .int8 import _load_rows, _segment_facts, _store_fold, all_fold, seg_factor
from .numerics import computed_here
from .packed import load_packed


@triton.jit
def _repeat_rows(x, REP: tl.constexpr):
    """x [R] or [R, C] with each row repeated REP times (row i at i * REP .. i * REP + REP - 1)."""
    if REP == 1:
        return x
    elif len(x.shape) == 1:
        return tl.reshape(tl.broadcast_to(x[:, None], (x.shape[0], REP)), (x.shape[0] * REP,))
    else:
        r: tl.constexpr = x.shape[0]
        c: tl.constexpr = x.shape[1]
        return tl.reshape(tl.broadcast_to(tl.reshape(x, (r, 1, c)), (r, REP, c)), (r * REP, c))


@triton.jit
def _load_w(w_ptr, wsh_ptr, cols, col_ok, K, k0, k_hi, BK: tl.constexpr, SB: tl.constexpr, PACKED: tl.constexpr):
    """int8 [BN, BK]: the folded weight's rows ``cols``, columns [k0, k0 + BK) (zeros past col_ok
    and k_hi), from its int8 form or (PACKED) its packed form (:mod:`mxfp4.kernels.packed`)."""
    if PACKED:
        return load_packed(w_ptr, wsh_ptr, cols, col_ok, K, k0, k_hi, BK, SB)
    else:
        return _load_rows(w_ptr, cols, col_ok, K, 1, k0, k_hi, BK)


@triton.jit
def _w_step(w_desc, w_ptr, wsh_ptr, col0, cols, col_ok, K, k0, k_hi, BK: tl.constexpr, PACKED: tl.constexpr,
            W_TMA: tl.constexpr):
    """The weight's K step at k0 (:func:`_load_w`); W_TMA: through its tensor descriptor (TMA
    straight to shared memory, no address per element; zeros past N and K). A step never
    reaches past its segment into the next one: segments are whole numbers of steps but the
    last, which ends at K (:func:`mxfp4.launch._segment_blocks`)."""
    if W_TMA:
        return w_desc.load([col0, k0])
    else:
        return _load_w(w_ptr, wsh_ptr, cols, col_ok, K, k0, k_hi, BK, BK, PACKED)


@triton.jit
def _load_steps(a_ptr, stride_am, stride_ak, row0, M, k0, k_hi, BMQ: tl.constexpr, BK: tl.constexpr, NR: tl.constexpr):
    """A's rows row0 .. row0 + BMQ - 1 over the NR K steps of BK from column k0, as one load of
    [NR * BMQ, BK] (row r holds step r // BMQ of row r % BMQ; zeros past M and k_hi): shaped as
    one step's tile, so the compiler gives it the layout of the K loop's A tiles (a [BMQ, NR * BK]
    load made it pick one that repeats each step's fold NR times over)."""
    r = tl.arange(0, NR * BMQ)
    row = row0 + r % BMQ
    k = k0 + (r // BMQ)[:, None] * BK + tl.arange(0, BK)[None, :]
    return tl.load(a_ptr + row[:, None] * stride_am + k * stride_ak, mask=(row < M)[:, None] & (k < k_hi), other=0)


@triton.jit
def _segment_loop(a_ptr, stride_am, stride_ak, w_desc, w_ptr, wsh_ptr, rows, row_ok, col0, cols, col_ok, K, k_lo, k_hi,
                  x_all, BM: tl.constexpr, BMQ: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ALL: tl.constexpr,
                  PACKED: tl.constexpr, W_TMA: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """A segment's int8 dot (int32 [BM, BN]) and its rows' facts (hi, lo, nan), every K step in
    one pipelined loop (from k_lo). ALL > 0: the facts come from x_all, the segment's A in one
    load of ALL columns (:func:`_load_steps`), issued before; ALL = 0: the segment is one step,
    whose facts are taken from its own load in the loop. Either way nothing the loop's loads
    wait for comes between the kernel's start and Triton's pipeline prologue, which issues the
    first steps' A and weight loads (cp.async, or TMA with W_TMA) there; the wait for a step's
    weight comes right before its dot (docs/results/s12/one_step_tma_probe.py). The dot runs
    whether or not the rows fold; the caller looks at the facts after it."""
    REP: tl.constexpr = BM // BMQ
    CB: tl.constexpr = BK // 32
    hi, lo, nan = _no_facts(BMQ)
    if ALL > 0:
        hi, lo, nan = _rest_facts(x_all, hi, lo, nan, BMQ, ALL // BK, CB, FLOOR_RULE)
    folded, ref = _fold_rule(hi, lo)
    d = tl.zeros((BM, BN), tl.int32)
    for k0 in range(k_lo, k_hi, BK):
        x = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, k0, k_hi, BK)
        xf, bits, amax, e, nonfinite = _scales(x, BMQ, CB, FLOOR_RULE)
        if ALL == 0:
            hi, lo, nan = _merge_scales(amax, e, nonfinite, hi, lo, nan)
            folded, ref = _fold_rule(hi, lo)
        q, _ = _fold_scaled(xf, bits, e, nonfinite, folded, ref, BMQ, CB)
        w = _w_step(w_desc, w_ptr, wsh_ptr, col0, cols, col_ok, K, k0, k_hi, BK, PACKED, W_TMA)
        d = tl.dot(_repeat_rows(q.to(tl.int8), REP), tl.trans(w), d, out_dtype=tl.int32)
    return d, hi, lo, nan


@triton.jit
def _rest_facts(x_rest, hi, lo, nan, BMQ: tl.constexpr, NR: tl.constexpr, CB: tl.constexpr, FLOOR_RULE: tl.constexpr):
    """The running facts of BMQ rows continued over x_rest [NR * BMQ, CB * 32] (:func:`_load_steps`)."""
    h, lw, n = _merge_facts(x_rest, *_no_facts(NR * BMQ), NR * BMQ, CB, FLOOR_RULE)
    return (tl.maximum(hi, tl.max(tl.reshape(h, (NR, BMQ)), axis=0)),
            tl.minimum(lo, tl.min(tl.reshape(lw, (NR, BMQ)), axis=0)),
            tl.maximum(nan, tl.max(tl.reshape(n, (NR, BMQ)), axis=0)))


@triton.jit
def a4w4_fused_kernel(a_ptr, stride_am, stride_ak, w_ptr, w_desc, wsh_ptr, wbs_ptr, wss_ptr, wok_ptr,
                      c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, q_ptr, bs_ptr, ss_ptr, ok_ptr,
                      M, N, K, SEG_BLOCKS, NSEG,
                      BM: tl.constexpr, BMQ: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      ONE_STEP: tl.constexpr, FLOOR_RULE: tl.constexpr, USE_SPLIT: tl.constexpr,
                      WRITE_FOLD: tl.constexpr, PACKED: tl.constexpr, REST: tl.constexpr = 0,
                      W_TMA: tl.constexpr = False, GRID3: tl.constexpr = False, ALL: tl.constexpr = 0,
                      REDUCERS: tl.constexpr = 1):
    """C[M, N] (bf16) from bf16 A [M, K] and the folded weight W (int8 [N, K] with its fold
    arrays) in one launch: each program folds the A rows it needs itself.

    One program per (tile, segment); a segment is all of K, or one split of split-K (the last
    program of a tile to arrive sums the partials in segment order). A program takes BMQ rows of
    A (BMQ < BM only when M < BM: each row is then repeated BM / BMQ times into the dot's rows,
    so no work goes into padding rows) and BN weight rows. It loads A's and the weight's first K
    step together, then reads its A rows over the rest of the segment for their fold facts, then
    per K step of BK quantizes and folds A in registers and runs an int8 dot (exact int32 sums),
    scaled once at the end. Where an A row or a W row of the tile does not
    fold over the segment, the segment goes block by block instead (exact for any data).
    ONE_STEP: every segment fits one K step (no K loop is compiled). REST > 0 (a power of two
    at least the segment's length past its first step): the fold facts of the rest of the
    segment come from one load of REST columns issued with the first step's loads, instead of a
    loop of K-step loads after them, each a memory round trip (loads that feed no dot are not
    pipelined; H200: 16x2112x7168 16.9 -> 15.8 us, ninth session run 5). ALL > 0 (a power of
    two at least the segment's length; REST is then 0): the facts come from one load of all of
    the segment and every step, the first too, runs in one pipelined loop
    (:func:`_segment_loop`), so the first steps' loads go out at the start instead of after the
    facts (H200: 16x2112x7168 15.21 -> 14.44 us, thirteenth session run 8). ONE_STEP with W_TMA
    runs the same loop with ALL = 0. WRITE_FOLD (tests): programs
    of the first N tile also write A's fold (the arrays of fold_a_kernel, bit for bit). PACKED:
    the weight is :class:`mxfp4.fold.PackedFold` (w_ptr its codes, wsh_ptr its shift words for
    K steps of BK), else
    :class:`mxfp4.fold.Folded` (w_ptr its int8 values; wsh_ptr unused). W_TMA: the weight's K
    steps come through w_desc, a tensor descriptor over the int8 values with [BN, BK] blocks
    (:func:`_w_step`; None otherwise). GRID3: the grid is (N tiles, M tiles, segments), else
    one axis of tiles * segments programs. REDUCERS: the last programs of a tile to arrive that
    share its split-K sum (:func:`mxfp4.kernels.a4w4._store_tile`; the launcher keeps it safe)."""
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(N, BN)
    if GRID3:  # grid (N tiles, M tiles, segments): no divisions before the first loads
        pid_n = pid
        pid_m = tl.program_id(1)
        seg = tl.program_id(2)
    else:
        tiles = tl.cdiv(M, BMQ) * n_tiles
        seg = pid // tiles
        pid_m = (pid % tiles) // n_tiles
        pid_n = pid % n_tiles
    REP: tl.constexpr = BM // BMQ
    CB: tl.constexpr = BK // 32
    rows = pid_m * BMQ + tl.arange(0, BMQ)
    row_ok = rows < M
    col0 = pid_n * BN
    cols = col0 + tl.arange(0, BN)
    col_ok = cols < N
    b_lo = seg * SEG_BLOCKS
    b_hi = tl.minimum(b_lo + SEG_BLOCKS, K // 32)
    k_lo = b_lo * 32
    k_hi = b_hi * 32
    # every step in one pipelined loop (_segment_loop): one-step segments with the weight by TMA,
    # and segments whose facts come from one load of all of the segment (ALL)
    LOOP: tl.constexpr = (ONE_STEP and W_TMA) or ALL > 0
    if LOOP:
        x_all = rows  # a placeholder where ALL = 0 (one step: its facts come from its own load)
        if ALL > 0:
            x_all = _load_steps(a_ptr, stride_am, stride_ak, pid_m * BMQ, M, k_lo, k_hi, BMQ, BK, ALL // BK)
        ok_w = tl.load(wok_ptr + cols * NSEG + seg, mask=col_ok, other=1)
        fw = tl.load(wss_ptr + cols * NSEG + seg, mask=col_ok, other=0.0)
        d, hi, lo, nan = _segment_loop(a_ptr, stride_am, stride_ak, w_desc, w_ptr, wsh_ptr, rows, row_ok, col0, cols,
                                       col_ok, K, k_lo, k_hi, x_all, BM, BMQ, BN, BK, ALL, PACKED, W_TMA, FLOOR_RULE)
        ok_w = all_fold(fw, ok_w)
    else:
        # Every load that waits on nothing first, so they share one memory round trip; the weight
        # last, as the compiler moves it to shared memory (and waits for it) right after its load.
        x0 = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, k_lo, k_hi, BK)
        x_rest = x0
        if REST > 0:
            x_rest = _load_steps(a_ptr, stride_am, stride_ak, pid_m * BMQ, M, k_lo + BK, k_hi, BMQ, BK, REST // BK)
        ok_w = tl.load(wok_ptr + cols * NSEG + seg, mask=col_ok, other=1)
        fw = tl.load(wss_ptr + cols * NSEG + seg, mask=col_ok, other=0.0)
        w0 = _w_step(w_desc, w_ptr, wsh_ptr, col0, cols, col_ok, K, k_lo, k_hi, BK, PACKED, W_TMA)
        # Reduced here, not at their use, where the compiler would move both loads.
        ok_w = all_fold(fw, ok_w)
        # x0's block scales serve both its facts and its fold
        xf0, bits0, amax0, e0, nonfinite0 = _scales(x0, BMQ, CB, FLOOR_RULE)
        r0 = round_with_scales(xf0, bits0, e0, nonfinite0)
        if ONE_STEP:
            # rounded here, before the facts' reduction (it needs none of them), not sunk to its use
            # after it: H200, K = 512 shapes 0.05-0.2 us faster; with a K loop it was slower
            r0 = computed_here(r0)
        hi, lo, nan = _merge_scales(amax0, e0, nonfinite0, *_no_facts(BMQ))
        if REST > 0:
            hi, lo, nan = _rest_facts(x_rest, hi, lo, nan, BMQ, REST // BK, CB, FLOOR_RULE)
        elif not ONE_STEP:
            hi, lo, nan = _segment_facts(a_ptr, stride_am, stride_ak, rows, row_ok, k_lo + BK, k_hi, hi, lo, nan,
                                         BMQ, CB, FLOOR_RULE)
    folded, ref = _fold_rule(hi, lo)
    if WRITE_FOLD:
        if pid_n == 0:
            _store_fold(a_ptr, stride_am, stride_ak, q_ptr, bs_ptr, ss_ptr, ok_ptr, rows, row_ok, K, b_lo, b_hi,
                        seg, NSEG, folded, ref, nan, BMQ, CB, FLOOR_RULE)
    if tl.min(folded.to(tl.int32)) * ok_w != 0:
        if not LOOP:  # (the loop form's dot ran in _segment_loop)
            q, _ = _fold_rounded(r0, e0, nonfinite0, folded, ref, BMQ, CB)
            d = tl.dot(_repeat_rows(q.to(tl.int8), REP), tl.trans(w0), out_dtype=tl.int32)
            if not ONE_STEP:
                for k0 in range(k_lo + BK, k_hi, BK):
                    x = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, k0, k_hi, BK)
                    q, _ = _fold_values(x, folded, ref, BMQ, CB, FLOOR_RULE)
                    w = _w_step(w_desc, w_ptr, wsh_ptr, col0, cols, col_ok, K, k0, k_hi, BK, PACKED, W_TMA)
                    d = tl.dot(_repeat_rows(q.to(tl.int8), REP), tl.trans(w), d, out_dtype=tl.int32)
        fa = seg_factor(ref, nan)
        acc = d.to(tl.float32) * (_repeat_rows(fa, REP)[:, None] * fw[None, :])
    else:
        acc = tl.zeros((BM, BN), tl.float32)
        unfolded = folded & False
        for b in range(b_lo, b_hi):
            x = _load_rows(a_ptr, rows, row_ok, stride_am, stride_ak, b * 32, k_hi, 32)
            q, fa = _fold_values(x, unfolded, ref, BMQ, 1, FLOOR_RULE)
            fa = tl.reshape(fa, (BMQ,))
            w = _load_w(w_ptr, wsh_ptr, cols, col_ok, K, b * 32, k_hi, 32, BK, PACKED)
            fwb = tl.load(wbs_ptr + cols * (K // 32) + b, mask=col_ok, other=0.0)
            d = tl.dot(_repeat_rows(q.to(tl.int8), REP), tl.trans(w), out_dtype=tl.int32)
            acc += d.to(tl.float32) * (_repeat_rows(fa, REP)[:, None] * fwb[None, :])
    _store_tile(acc, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, pid_n, pid_m, seg, n_tiles, NSEG,
                BM, BN, USE_SPLIT, REP, REDUCERS)
