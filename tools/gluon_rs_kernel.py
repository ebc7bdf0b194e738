"""Experiment (eighth session): the one-launch int8 path with the weight at MXFP4 size as wgmma's
register operand, in Gluon. Correct (tests/test_tools.py on the H200) but slower than the
library's int8_fused kernel on every shape tuned (NOTES.md, "Eighth session"), so it is not a
library kernel; it lived in src/mxfp4/kernels/rs.py at commit fa68464, where it was measured.

Gluon code (``triton.experimental.gluon``: explicit layouts; no CPU interpreter, so sm_90 GPUs
only); the launcher is :func:`gluon_rs.launch_rs`.

Swap A and B: a program computes C^T [BNW, BA] = W [BNW, K] x A^T, so the weight is wgmma's
register operand and A (a few rows) its shared-memory operand. The weight is the packed fold
(e2m1 codes and a shift per MX block, :func:`gluon_rs.rs_fold`) with each block's codes
stored in the order of the wgmma A-operand fragment (:func:`gluon_rs.rs_codes`): the 32-bit
word of lane % 4 = q holds K offsets 4q .. 4q+3 and 16+4q .. 16+4q+3 of its row and block.
After ``ldmatrix`` and the ``prmt`` unpack below (``_UNPACK_ASM``) the int8 values are
where wgmma reads them: the layout conversions are asserted trivial (no data movement). The
codes and the block shifts (a 16-byte tile per row and K step, :func:`gluon_rs.shift_plane`)
come by TMA through an mbarrier ring that is filled before A is touched.

A program takes BA rows of A over one segment (all of K, or one split of split-K) in one load,
takes the fold facts and the fold (the rule of :mod:`mxfp4.kernels.int8`, bit for bit) from the
same registers, stores the folded segment to shared memory, then runs the K loop. Where an A row
or a W row of the tile does not fold over the segment, it goes block by block instead (exact for
any data). Split-K partials are summed by the last program of a tile in segment order (bitwise
deterministic).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                warpgroup_mma_wait)

from mxfp4.kernels.foldmath import _fold_rule, _fold_scaled, _merge_scales, _scales
from mxfp4.kernels.int8 import all_fold, seg_factor

# The unpack of gluon_rs.pack_words' byte order, per 32-bit word of 8 codes: prmt picks each
# code's magnitude out of the block's 8-byte table (sign bit set: 0), once from the word and once
# from the word with its sign bits flipped; ((pos | 0x80) - neg) ^ 0x80 per byte is the value.
_UNPACK_ASM = gl.constexpr("""{
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


@gluon.constexpr_function
def _log2(x):
    return x.bit_length() - 1


@gluon.constexpr_function
def code_layout(BNW, CB, num_warps):
    """The packed codes of a K step viewed as [BNW, CB, 16] bytes (row, MX block, byte): each
    thread holds the 32-bit word of lane % 4 for its two rows (r and r + 8) of every block, rows
    as in the wgmma A-operand fragment."""
    reg = [[0, 0, 1], [0, 0, 2], [8, 0, 0]] + [[0, 1 << i, 0] for i in range(_log2(CB))]
    lane = [[0, 0, 4], [0, 0, 8], [1, 0, 0], [2, 0, 0], [4, 0, 0]]
    warp = [[16 << i, 0, 0] for i in range(_log2(num_warps))]
    return gl.DistributedLinearLayout(reg, lane, warp, [], [BNW, CB, 16])


@gluon.constexpr_function
def flat_code_layout(BNW, CB, num_warps):
    """:func:`code_layout` over the 2-D tile of codes [BNW, 16 * CB] (byte column 16 * block + byte)."""
    reg = [[0, 1], [0, 2], [8, 0]] + [[0, 16 << i] for i in range(_log2(CB))]
    lane = [[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]]
    warp = [[16 << i, 0] for i in range(_log2(num_warps))]
    return gl.DistributedLinearLayout(reg, lane, warp, [], [BNW, 16 * CB])


@gluon.constexpr_function
def rs_mma_layout(BA, num_warps):
    """The accumulator [16 * num_warps, BA]: one wgmma row block of 16 per warp, n = BA."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BA, 32])


@gluon.constexpr_function
def a_layout(BA, BK, num_warps):
    """A's bf16 chunks [BA, BK]: 8 consecutive K per thread, up to a warp along K."""
    tk = min(32, BK // 8)
    return gl.BlockedLayout([1, 8], [32 // tk, tk], [num_warps, 1], [1, 0])


@gluon.jit
def unpack_codes(codes, sh, BNW: gl.constexpr, CB: gl.constexpr, BA: gl.constexpr, num_warps: gl.constexpr):
    """int8 [BNW, 32 * CB] weight values in the wgmma A-operand layout, from codes uint8
    [BNW, 16 * CB] (:func:`flat_code_layout`) and their blocks' shifts int32 [BNW, CB]
    (SliceLayout(2, :func:`code_layout`))."""
    L3: gl.constexpr = code_layout(BNW, CB, num_warps)
    dot_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=rs_mma_layout(BA, num_warps), k_width=4)
    t_lo = gl.expand_dims(0x03020100 << sh, 2) + gl.zeros([BNW, CB, 16], gl.int32, layout=L3)
    t_hi = gl.expand_dims(0x0C080604 << sh, 2) + gl.zeros([BNW, CB, 16], gl.int32, layout=L3)
    c3 = gl.convert_layout(gl.reshape(codes, [BNW, CB, 16]), L3, assert_trivial=True)
    lo, hi = gl.inline_asm_elementwise(_UNPACK_ASM, "=r,=r,r,r,r,r,r,r,r,r,r", [c3, t_lo, t_hi],
                                       dtype=(gl.int8, gl.int8), is_pure=True, pack=4)
    # value i of a word (lo, hi interleaved) is K offset 16 * (i // 4) + 4 * q + i % 4
    v = gl.reshape(gl.join(lo, hi), [BNW, CB, 4, 2, 4])
    v = gl.reshape(gl.permute(v, (0, 1, 3, 2, 4)), [BNW, 32 * CB])
    return gl.convert_layout(v, dot_l, assert_trivial=True)


@gluon.jit
def rs_step(acc, w_s, sh_s, bars, slot, phase, b_tile, BNW: gl.constexpr, CB: gl.constexpr, BA: gl.constexpr,
            num_warps: gl.constexpr):
    """One K step of the register-operand product: wait for ring slot ``slot`` (codes and shifts),
    unpack its codes into wgmma's register operand, acc += W x b_tile^T (b_tile: the step's A,
    shared [BA, BK]); waited for (the next step's unpack may reuse the registers)."""
    mbarrier.wait(bars.index(slot), phase)
    sh = sh_s.index(slot).slice(0, CB, dim=1).load(gl.SliceLayout(2, code_layout(BNW, CB, num_warps))).to(gl.int32)
    wv = unpack_codes(w_s.index(slot).load(flat_code_layout(BNW, CB, num_warps)), sh, BNW, CB, BA, num_warps)
    acc = warpgroup_mma(wv, b_tile.permute((1, 0)), acc, is_async=True)
    return warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))


@gluon.jit
def _load_a(a_ptr, stride_am, stride_ak, rows, row_ok, k0, k_hi, BK: gl.constexpr, LA: gl.constexpr):
    """A[rows, k0 : k0 + BK] (bf16, zeros past row_ok and past column k_hi)."""
    k = k0 + gl.arange(0, BK, layout=gl.SliceLayout(0, LA))
    return gl.load(a_ptr + gl.expand_dims(rows, 1) * stride_am + gl.expand_dims(k, 0) * stride_ak,
                   mask=gl.expand_dims(row_ok, 1) & gl.expand_dims(k < k_hi, 0), other=0.0)


@gluon.jit
def _store_steps(a_s, q, BA: gl.constexpr, BK: gl.constexpr, SEG_STEPS: gl.constexpr):
    """Store q [BA, SEG_STEPS * BK] (1, 2 or 4 steps) as a_s's SEG_STEPS tiles [BA, BK]."""
    if SEG_STEPS == 1:
        a_s.index(0).store(q)
    elif SEG_STEPS == 2:
        q0, q1 = gl.split(gl.permute(gl.reshape(q, [BA, 2, BK]), (0, 2, 1)))
        a_s.index(0).store(q0)
        a_s.index(1).store(q1)
    else:
        lo0, lo1 = gl.split(gl.permute(gl.reshape(q, [BA, 2, 2, BK]), (0, 3, 1, 2)))  # step 2 * hi + lo
        q0, q2 = gl.split(lo0)
        q1, q3 = gl.split(lo1)
        a_s.index(0).store(q0)
        a_s.index(1).store(q1)
        a_s.index(2).store(q2)
        a_s.index(3).store(q3)


@gluon.jit
def _ring_load(w_desc, sh_desc, bars, w_s, sh_s, slot, col0, step, pred):
    """Ask TMA for K step ``step``'s codes and shifts into ring slot ``slot``."""
    mbarrier.expect(bars.index(slot), w_desc.block_type.nbytes + sh_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(sh_desc, [col0, step * 16], bars.index(slot), sh_s.index(slot), pred=pred)
    tma.async_copy_global_to_shared(w_desc, [col0, step * (w_desc.block_type.shape[1])], bars.index(slot),
                                    w_s.index(slot), pred=pred)


@gluon.jit
def _blockwise(a_ptr, stride_am, stride_ak, wc_ptr, wsh_ptr, wbs_ptr, rows, row_ok, col0, N, K, b_lo, b_hi,
               BA: gl.constexpr, BNW: gl.constexpr, FLOOR_RULE: gl.constexpr, num_warps: gl.constexpr):
    """float32 [BNW, BA]: blocks [b_lo, b_hi) one at a time, each an exact int32 product scaled
    by its two block factors (the way of tiles that do not fold; any data)."""
    mma: gl.constexpr = rs_mma_layout(BA, num_warps)
    LA: gl.constexpr = a_layout(BA, 32, num_warps)
    LC: gl.constexpr = flat_code_layout(BNW, 1, num_warps)
    LS: gl.constexpr = gl.SliceLayout(2, code_layout(BNW, 1, num_warps))
    a32_s = gl.allocate_shared_memory(gl.int8, [BA, 32], gl.NVMMASharedLayout.get_default_for([BA, 32], gl.int8))
    wr = col0 + gl.arange(0, BNW, layout=gl.SliceLayout(1, LC))
    wb = gl.arange(0, 16, layout=gl.SliceLayout(0, LC))
    sr = col0 + gl.arange(0, BNW, layout=gl.SliceLayout(1, LS))
    sb = gl.arange(0, 1, layout=gl.SliceLayout(0, LS))
    fr = col0 + gl.arange(0, BNW, layout=gl.SliceLayout(1, mma))
    rows = gl.convert_layout(rows, gl.SliceLayout(1, LA))
    row_ok = gl.convert_layout(row_ok, gl.SliceLayout(1, LA))
    KB = K // 32
    acc = gl.zeros([BNW, BA], gl.float32, layout=mma)
    for b in range(b_lo, b_hi):
        x = _load_a(a_ptr, stride_am, stride_ak, rows, row_ok, b * 32, K, 32, LA)
        xf, bits, _, e, nonfinite = _scales(x, BA, 1, FLOOR_RULE)
        unfolded = gl.max(e, axis=1) < -1000000  # no row folded: 2 * e2m1 unshifted, factor 2**(e - 1)
        q, fa = _fold_scaled(xf, bits, e, nonfinite, unfolded, gl.max(e, axis=1) * 0, BA, 1)
        codes = gl.load(wc_ptr + gl.expand_dims(wr, 1) * (K // 2) + b * 16 + gl.expand_dims(wb, 0),
                        mask=gl.expand_dims(wr < N, 1), other=0)
        sh = gl.load(wsh_ptr + gl.expand_dims(sr, 1) * KB + b + gl.expand_dims(sb, 0),
                     mask=gl.expand_dims(sr < N, 1), other=0)
        wv = unpack_codes(codes, sh.to(gl.int32), BNW, 1, BA, num_warps)
        gl.thread_barrier()  # the previous block's wgmma has finished reading a32_s in every warp
        a32_s.store(q.to(gl.int8))
        fence_async_shared()
        gl.thread_barrier()
        d = warpgroup_mma(wv, a32_s.permute((1, 0)), gl.zeros([BNW, BA], gl.int32, layout=mma), use_acc=False,
                          is_async=True)
        d = warpgroup_mma_wait(num_outstanding=0, deps=(d, ))
        fwb = gl.load(wbs_ptr + fr * KB + b, mask=fr < N, other=0.0)
        fab = gl.convert_layout(gl.reshape(fa, [BA]), gl.SliceLayout(0, mma))
        acc += d.to(gl.float32) * (gl.expand_dims(fab, 0) * gl.expand_dims(fwb, 1))
    return acc


@gluon.jit
def a4w4_rs_kernel(a_ptr, stride_am, stride_ak, w_desc, sh_desc, wc_ptr, wsh_ptr, wbs_ptr, wss_ptr, wok_ptr,
                   c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, K, SEG_BLOCKS, NSEG,
                   BA: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, SEG_STEPS: gl.constexpr,
                   FLOOR_RULE: gl.constexpr, USE_SPLIT: gl.constexpr, num_warps: gl.constexpr):
    """C[M, N] (bf16) from bf16 A [M, K] and the weight's packed fold in fragment order (w_desc:
    codes uint8 [N, K / 2], blocks [BNW, BK / 2]; sh_desc: the shift plane, blocks [BNW, 16]; wc_ptr
    / wsh_ptr: the same codes and the block shifts uint8 [N, K / 32] for the block-by-block way;
    wbs / wss / wok: the fold's block factors, segment factors and flags). One program per
    (tile of BNW = 16 * num_warps weight rows and BA rows of A, segment); SEG_STEPS: the K steps
    of the longest segment, rounded up to a power of two, 1, 2 or 4 (the segment's A is one
    load)."""
    BNW: gl.constexpr = 16 * num_warps
    CB: gl.constexpr = BK // 32
    mma: gl.constexpr = rs_mma_layout(BA, num_warps)
    pid = gl.program_id(0)
    n_tiles = gl.cdiv(N, BNW)
    tiles = gl.cdiv(M, BA) * n_tiles
    seg = pid // tiles
    tile = pid % tiles
    pid_m = tile // n_tiles
    pid_n = tile % n_tiles
    row0 = pid_m * BA
    col0 = pid_n * BNW
    KB = K // 32
    b_lo = seg * SEG_BLOCKS
    b_hi = gl.minimum(b_lo + SEG_BLOCKS, KB)
    k_lo = b_lo * 32
    k_hi = b_hi * 32
    nk = gl.cdiv(k_hi - k_lo, BK)
    step0 = k_lo // BK

    # The weight's first steps go out before A is touched: they wait on nothing.
    w_s = gl.allocate_shared_memory(gl.uint8, [STAGES, BNW, BK // 2], w_desc.layout)
    sh_s = gl.allocate_shared_memory(gl.uint8, [STAGES, BNW, 16], sh_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(STAGES - 1):
        _ring_load(w_desc, sh_desc, bars, w_s, sh_s, i, col0, step0 + i, i < nk)

    cols = col0 + gl.arange(0, BNW, layout=gl.SliceLayout(1, mma))
    col_ok = cols < N
    fw = gl.load(wss_ptr + cols * NSEG + seg, mask=col_ok, other=0.0)
    ok_w = all_fold(fw, gl.load(wok_ptr + cols * NSEG + seg, mask=col_ok, other=1))

    # A's segment in one load (one memory round trip): its fold facts (largest / smallest
    # exponent of its nonzero blocks, NaN) and its fold come from the same registers
    LA: gl.constexpr = a_layout(BA, BK, num_warps)  # the steps wrap into registers (_store_steps)
    rows = row0 + gl.arange(0, BA, layout=gl.SliceLayout(1, LA))
    row_ok = rows < M
    x = _load_a(a_ptr, stride_am, stride_ak, rows, row_ok, k_lo, k_hi, SEG_STEPS * BK, LA)
    xf, bits, amax, e, nonfinite = _scales(x, BA, SEG_STEPS * CB, FLOOR_RULE)
    e_row = gl.max(e, axis=1)
    hi, lo, nan = _merge_scales(amax, e, nonfinite, e_row * 0 - 1000, e_row * 0 + 1000, e_row * 0)
    folded, ref = _fold_rule(hi, lo)
    fast = gl.min(folded.to(gl.int32), axis=0) * ok_w != 0

    if fast:
        # A's segment, quantized and folded, into shared memory: the wgmma's B operand
        a_s = gl.allocate_shared_memory(gl.int8, [SEG_STEPS, BA, BK], gl.NVMMASharedLayout.get_default_for([BA, BK],
                                                                                                           gl.int8))
        q, _ = _fold_scaled(xf, bits, e, nonfinite, folded, ref, BA, SEG_STEPS * CB)
        _store_steps(a_s, q.to(gl.int8), BA, BK, SEG_STEPS)
        fence_async_shared()
        gl.thread_barrier()
        acc = gl.zeros([BNW, BA], gl.int32, layout=mma)
        for j in range(nk):
            acc = rs_step(acc, w_s, sh_s, bars, j % STAGES, (j // STAGES) & 1, a_s.index(j), BNW, CB, BA, num_warps)
            gl.thread_barrier()  # every warp is done with the slot before TMA refills it
            nxt = j + STAGES - 1
            _ring_load(w_desc, sh_desc, bars, w_s, sh_s, nxt % STAGES, col0, step0 + nxt, nxt < nk)
        fa = gl.convert_layout(seg_factor(ref, nan), gl.SliceLayout(0, mma))
        out = acc.to(gl.float32) * (gl.expand_dims(fa, 0) * gl.expand_dims(fw, 1))
    else:
        for i in gl.static_range(STAGES - 1):  # let the ring's loads land before the CTA moves on
            mbarrier.wait(bars.index(i), 0, pred=i < nk)
        out = _blockwise(a_ptr, stride_am, stride_ak, wc_ptr, wsh_ptr, wbs_ptr, rows, row_ok, col0, N, K, b_lo,
                         b_hi, BA, BNW, FLOOR_RULE, num_warps)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(i))
    _store_tile_t(out, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, row0, col0, tile, seg, NSEG,
                  BA, BNW, USE_SPLIT, num_warps)


@gluon.jit
def _store_tile_t(out, c_ptr, stride_cm, stride_cn, part_ptr, tile_cnt_ptr, M, N, row0, col0, tile, seg, NSEG,
                  BA: gl.constexpr, BNW: gl.constexpr, USE_SPLIT: gl.constexpr, num_warps: gl.constexpr):
    """Write a finished C^T tile [BNW, BA]: straight to C, or as a split-K partial; the last
    partial of a tile to arrive sums all of them in segment order and writes C."""
    mma: gl.constexpr = rs_mma_layout(BA, num_warps)
    lr = gl.arange(0, BNW, layout=gl.SliceLayout(1, mma))
    lc = gl.arange(0, BA, layout=gl.SliceLayout(0, mma))
    cols = col0 + lr
    rows = row0 + lc
    c_ptrs = c_ptr + gl.expand_dims(rows, 0) * stride_cm + gl.expand_dims(cols, 1) * stride_cn
    c_mask = gl.expand_dims(rows < M, 0) & gl.expand_dims(cols < N, 1)
    if USE_SPLIT:
        local = gl.expand_dims(lr, 1) * BA + gl.expand_dims(lc, 0)
        base = part_ptr + tile.to(gl.int64) * NSEG * (BNW * BA)
        gl.store(base + seg * (BNW * BA) + local, out)
        gl.thread_barrier()
        arrived = gl.atomic_add(tile_cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == NSEG - 1:
            summed = gl.zeros([BNW, BA], gl.float32, layout=mma)
            for s in range(NSEG):
                summed += gl.load(base + s * (BNW * BA) + local, cache_modifier=".cg")
            gl.store(c_ptrs, summed.to(gl.bfloat16), mask=c_mask)
            gl.atomic_xchg(tile_cnt_ptr + tile, 0, sem="relaxed", scope="gpu")
    else:
        gl.store(c_ptrs, out.to(gl.bfloat16), mask=c_mask)
