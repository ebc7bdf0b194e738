"""Two int8 GEMM launches written in Gluon, for an experiment (tools/gluon_probe.py; eighth
session, NOTES.md): they take A already folded (mxfp4.launch.fold_a) and only the all-folded path
(MODE 0 of mxfp4.kernels.int8), so they are not library kernels.

- g_int8_gemm: the shipped int8 GEMM's tiles with both operands from shared memory (TMA, an
  mbarrier ring) and the wgmma kept in flight across K steps (warpgroup_mma_wait(1)), which
  Triton 3.6 does not do for an int32 accumulator.
- g_rs_gemm: C^T = W x A^T with the weight at MXFP4 size as wgmma's register operand (the codes
  in gluon_rs.rs_codes' order, unpacked by gluon_rs_kernel.unpack_codes straight into the
  wgmma A-operand fragment; the block shifts by TMA beside them, gluon_rs.shift_plane).
  Split-K partials are summed in int32 by atomics (exact, so order-free); the last split of a
  tile scales, stores and zeroes the scratch. gluon_rs_kernel.a4w4_rs_kernel grew from it,
  with A folded inside and float32 partials.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, warpgroup_mma, warpgroup_mma_wait

from gluon_rs_kernel import rs_mma_layout, rs_step


@gluon.constexpr_function
def _mma_layout(BM, BN, num_warps):
    """wgmma accumulator layout: warps along M first (16 rows each), then along N; the largest
    int8 instruction n (<= 224, a multiple of 16 dividing the warp's columns)."""
    wm = min(num_warps, max(4, BM // 16))
    wn = num_warps // wm
    n = BN // wn
    while n > 224 or (BN // wn) % n:
        n -= 16
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[wm, wn], instr_shape=[16, n, 32])


@gluon.jit
def g_int8_gemm(a_desc, w_desc, fa_ptr, fw_ptr, c_ptr, stride_cm, M, N, K,
                STAGES: gl.constexpr, GROUP_M: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    pid = gl.program_id(0)
    m_tiles = gl.cdiv(M, BM)
    n_tiles = gl.cdiv(N, BN)
    per_group = GROUP_M * n_tiles
    first_m = (pid // per_group) * GROUP_M
    group_m = gl.minimum(m_tiles - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    row0 = pid_m * BM
    col0 = pid_n * BN

    a_s = gl.allocate_shared_memory(gl.int8, [STAGES, BM, BK], a_desc.layout)
    w_s = gl.allocate_shared_memory(gl.int8, [STAGES, BN, BK], w_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + w_desc.block_type.nbytes
    nk = gl.cdiv(K, BK)
    for i in gl.static_range(STAGES - 1):
        p = i < nk
        mbarrier.expect(bars.index(i), nbytes, pred=p)
        tma.async_copy_global_to_shared(a_desc, [row0, i * BK], bars.index(i), a_s.index(i), pred=p)
        tma.async_copy_global_to_shared(w_desc, [col0, i * BK], bars.index(i), w_s.index(i), pred=p)

    mma: gl.constexpr = _mma_layout(BM, BN, num_warps)
    acc = gl.zeros((BM, BN), gl.int32, layout=mma)
    for ki in range(nk):
        s = ki % STAGES
        mbarrier.wait(bars.index(s), (ki // STAGES) & 1)
        acc = warpgroup_mma(a_s.index(s), w_s.index(s).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
        nxt = ki + STAGES - 1
        sn = nxt % STAGES
        p = nxt < nk
        mbarrier.expect(bars.index(sn), nbytes, pred=p)
        tma.async_copy_global_to_shared(a_desc, [row0, nxt * BK], bars.index(sn), a_s.index(sn), pred=p)
        tma.async_copy_global_to_shared(w_desc, [col0, nxt * BK], bars.index(sn), w_s.index(sn), pred=p)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(i))

    offs_m = row0 + gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
    offs_n = col0 + gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
    mask_m = offs_m < M
    mask_n = offs_n < N
    fa = gl.load(fa_ptr + offs_m, mask=mask_m, other=0.0)
    fw = gl.load(fw_ptr + offs_n, mask=mask_n, other=0.0)
    out = acc.to(gl.float32) * (gl.expand_dims(fa, 1) * gl.expand_dims(fw, 0))
    ptrs = c_ptr + gl.expand_dims(offs_m, 1) * stride_cm + gl.expand_dims(offs_n, 0)
    gl.store(ptrs, out.to(gl.bfloat16), mask=gl.expand_dims(mask_m, 1) & gl.expand_dims(mask_n, 0))


@gluon.jit
def g_rs_gemm(a_desc, w_desc, sh_desc, fa_ptr, fw_ptr, c_ptr, stride_cm, M, N, K, part_ptr, cnt_ptr,
              STAGES: gl.constexpr, SPLIT: gl.constexpr, num_warps: gl.constexpr):
    """C^T tile [BNW, BA] = W (packed codes, unpacked to int8 in registers: the wgmma A operand)
    x A^T (folded A from shared memory: the B operand)."""
    BA: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BNW: gl.constexpr = w_desc.block_type.shape[0]
    CB: gl.constexpr = BK // 32
    pid = gl.program_id(0)
    m_tiles = gl.cdiv(M, BA)
    tile = pid // SPLIT
    split = pid % SPLIT
    pid_m = tile % m_tiles
    pid_n = tile // m_tiles
    row0 = pid_m * BA
    col0 = pid_n * BNW
    steps = gl.cdiv(K, BK)
    per = gl.cdiv(steps, SPLIT)
    k_first = split * per
    nk = gl.minimum(steps - k_first, per)

    a_s = gl.allocate_shared_memory(gl.int8, [STAGES, BA, BK], a_desc.layout)
    w_s = gl.allocate_shared_memory(gl.uint8, [STAGES, BNW, BK // 2], w_desc.layout)
    sh_s = gl.allocate_shared_memory(gl.uint8, [STAGES, BNW, 16], sh_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + w_desc.block_type.nbytes + sh_desc.block_type.nbytes
    for i in gl.static_range(STAGES - 1):
        p = i < nk
        mbarrier.expect(bars.index(i), nbytes, pred=p)
        tma.async_copy_global_to_shared(sh_desc, [col0, (k_first + i) * 16], bars.index(i), sh_s.index(i), pred=p)
        tma.async_copy_global_to_shared(a_desc, [row0, (k_first + i) * BK], bars.index(i), a_s.index(i), pred=p)
        tma.async_copy_global_to_shared(w_desc, [col0, (k_first + i) * (BK // 2)], bars.index(i), w_s.index(i),
                                        pred=p)

    mma: gl.constexpr = rs_mma_layout(BA, num_warps)
    acc = gl.zeros((BNW, BA), gl.int32, layout=mma)
    for ki in range(nk):
        s = ki % STAGES
        acc = rs_step(acc, w_s, sh_s, bars, s, (ki // STAGES) & 1, a_s.index(s), BNW, CB, BA, num_warps)
        nxt = ki + STAGES - 1
        sn = nxt % STAGES
        p = nxt < nk
        mbarrier.expect(bars.index(sn), nbytes, pred=p)
        tma.async_copy_global_to_shared(sh_desc, [col0, (k_first + nxt) * 16], bars.index(sn), sh_s.index(sn),
                                        pred=p)
        tma.async_copy_global_to_shared(a_desc, [row0, (k_first + nxt) * BK], bars.index(sn), a_s.index(sn),
                                        pred=p)
        tma.async_copy_global_to_shared(w_desc, [col0, (k_first + nxt) * (BK // 2)], bars.index(sn),
                                        w_s.index(sn), pred=p)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(i))

    offs_n = col0 + gl.arange(0, BNW, layout=gl.SliceLayout(1, mma))
    offs_m = row0 + gl.arange(0, BA, layout=gl.SliceLayout(0, mma))
    mask_n = offs_n < N
    mask_m = offs_m < M
    if SPLIT > 1:
        # int32 partials summed exactly in a scratch tile (order-free); the last split to arrive
        # scales and stores, then leaves the scratch and its counter zeroed for the next call.
        pp = part_ptr + tile * (BNW * BA) + gl.expand_dims(gl.arange(0, BNW, layout=gl.SliceLayout(1, mma)), 1) * BA \
            + gl.expand_dims(gl.arange(0, BA, layout=gl.SliceLayout(0, mma)), 0)
        gl.atomic_add(pp, acc, sem="relaxed")
        gl.thread_barrier()
        arrived = gl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT - 1:
            acc = gl.atomic_xchg(pp, gl.zeros((BNW, BA), gl.int32, layout=mma), sem="relaxed")
            gl.store(cnt_ptr + tile, 0)
        else:
            return
    fa = gl.load(fa_ptr + offs_m, mask=mask_m, other=0.0)
    fw = gl.load(fw_ptr + offs_n, mask=mask_n, other=0.0)
    out = acc.to(gl.float32) * (gl.expand_dims(fa, 0) * gl.expand_dims(fw, 1))
    ptrs = c_ptr + gl.expand_dims(offs_m, 0) * stride_cm + gl.expand_dims(offs_n, 1)
    gl.store(ptrs, out.to(gl.bfloat16), mask=gl.expand_dims(mask_m, 0) & gl.expand_dims(mask_n, 1))
