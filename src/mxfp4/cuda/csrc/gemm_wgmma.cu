// C[M, N] (bf16) = dequant(quant(A)) @ dequant(W)^T for large M, on the int8 warpgroup tensor cores
// (wgmma). Two launches, chained on one stream: the prep, then one of two GEMMs.
//
// Bands: a segment is 8 blocks of 32 elements. A token's band is the window [lo, lo + 3] of e8m0
//   exponents holding the most of its nonzero blocks (ties: the lowest lo), its mask the blocks inside
//   it; a token tile's mask, the AND of its tokens' masks, is taken by the GEMM. A weight row's band
//   is the window starting at its smallest exponent or the one ending at its largest, whichever holds
//   more of its blocks (ties: the lower; row_band), a weight tile's (or 32-row unit's) mask the AND
//   of its rows'. A band's blocks are shifted left by their exponent minus the band's
//   smallest (<= 3: twice an e2m1 value, <= 12, stays int8) and share one multiplier, 2**(smallest -
//   128); the others keep their own. The blocks in both masks add into one int32 sum, scaled once;
//   every other block is a term of its own. An outlier channel's block leaves the band and the rest
//   of its segment still folds.
//
// Both operands reach wgmma as int8 in shared memory in one layout: 128-byte rows (a token's or a
// weight row's 4 blocks of a half segment), 16-byte chunks swizzled (chunk ^ row % 8: the 128-byte
// swizzle), a block's 32 values permuted so that position 4t + j holds element 8t + j and position
// 16 + 4t + j holds element 8t + 4 + j (t = 0..3: a 4-byte word of the weight's codes gives both).
//
// mxfp4_wgmma_prep (PREP_THREADS a CTA; a warp quantizes one token's segment, so every token is
// done on its own and A spreads over TN / 8 CTAs a tile and segment), workspace per call, nothing kept:
//     ablob [nseg][ntile] blobs of ABLOB bytes, one bulk copy per stage: the tile's int8 values as
//          two swizzle atoms (blocks 0-3, then 4-7), then the band multiplier per token (TN
//          floats), the per-block multipliers [8][TN] and the tokens' band masks (TN bytes);
//     for mxfp4_gemm_i8 only (CTAs from a_ctas on): wblob [ceil(N / 128)][nseg] blobs of WBLOB
//          bytes: the weight's values as int8 (its band's blocks shifted), multipliers [8][128],
//          each row's accumulator start, the tile's mask.
//
// mxfp4_gemm_cv (TN 64 or 128, up to 512 tokens): the weight's codes as stored, converted to int8 in
//   shared memory by a warpgroup of the CTA (below, at the kernel).
// mxfp4_gemm_i8 (TN 128, above): one CTA per 128 tokens x 128 weight rows, both operands from the
//   prep's blobs, nothing converted.
// The fold: the int32 accumulator starts at the bits of 1.5 * 2**23 * 2**(ew - 128) (ew: the row's
//   band minimum), so the sum lands in the mantissa and float(bits) - start is the sum times the
//   row's factor, exactly; one fma with the token's multiplier adds the term. A row's path depends on
//   the other rows of its tiles: its output can differ in the last bits with them, always inside
//   the bound.
//
// Numerics: every term is exact; the terms (at most K/32) are added in float32 in a fixed order and
// the total is rounded once to bf16 (error <= (K/32 - 1) * 2**-24 of the sum of magnitudes). Domain:
// -147 <= ea + ew <= 112 for every block.
#include "wgmma.cuh"

#ifndef TN
#error "TN and STAGES are set by the JIT"
#endif
// OUT_F32 1 (out_t, mxfp4.cuh): C is float32, the GEMMs' float32 totals unrounded, stored from
// registers: no staging tile, so the shared memory is the bf16 variant's. Only the output differs.

#define SEG 8                              // blocks per segment
#define TW 128                             // weight rows per CTA
#define META (TN * (5 + 4 * SEG))          // fold[TN], blk[SEG][TN] floats, the tokens' masks[TN]
#define ABLOB (TN * 128 * (SEG / 4) + META) // one token tile's segment: values, then meta
#define S_M (TN * 128 * (SEG / 4))         //   its meta (the values: SEG / 4 swizzle atoms of [TN][128])
#define GM 16                              // token tiles per raster group (L2 reuse of A)
#define PREP_THREADS 256                   // a prep CTA: 8 tokens of a (token tile, segment) of A, a warp
                                           // a token, or one weight tile-segment as int8 (mxfp4_gemm_i8)
#define META_THREADS 64                    // mxfp4_gemm_cv's exponent warps (1 and 2)
#define C_PITCH (TW + 8)                   // bf16 per token row of the staged output tile
// A weight tile's segment as int8 (mxfp4_gemm_i8's blob, mxfp4_gemm_cv's CV slot): values as A's, then
#define W_MULT (TW * 128 * (SEG / 4))      //   multipliers [SEG][TW] (float)
#define W_MAGIC (W_MULT + SEG * TW * 4)    //   the fold's accumulator start per row (u32)
#define W_MASK (W_MAGIC + TW * 4)          //   the tile's band mask (mxfp4_gemm_i8), or one a 32-row unit
#define WBLOB (W_MASK + 16)
#define S8_W ((ABLOB + 1023) / 1024 * 1024)
#define STAGE8 ((S8_W + WBLOB + 1023) / 1024 * 1024)
#define ZERO8 (STAGES * STAGE8)            // mxfp4_gemm_i8's 8-row atom of zeros: the A of blocks outside the fold
#define SMEM8 (1024 + ZERO8 + 1024 + 2 * STAGES * 8)

static_assert(TN == 64 || TN == 128, "token tile");

namespace {

// Four int8 (packed) shifted left by s (0..3) each; no value leaves int8 (|v| <= 12 before).
__device__ __forceinline__ u32 shl_s8x4(u32 x, u32 s) {
  return (x << s) & (0x01010101u * ((0xFFu << s) & 0xFFu));
}

// The band of a token's segment: the window [lo, lo + 3] of exponents holding the most of its
// nonzero blocks (ties: the lowest lo). `e` is this lane's block exponent (-1: zero or NaN, any
// band); lane 4b holds block b. Outlier channels put one block 4..7 binary orders above the rest:
// the band leaves it out, and the other seven still fold.
__device__ __forceinline__ int band_window(int e) {
  int count = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const int ec = __shfl_sync(0xffffffffu, e, 4 * c, 32);
    count += ec >= 0 && ec >= e && ec <= e + 3;
  }
  int key = e >= 0 ? (count << 8) | (255 - e) : 0;
#pragma unroll
  for (int x = 4; x <= 16; x <<= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, x));
  return 255 - (key & 255);
}

// A weight row's band from its eight exponent bytes x0 (blocks 0-3), x1 (4-7), 255 for NaN or past
// K (in no band), byte-parallel (four bytes an operation): of the windows
// starting at its smallest exponent and ending at its largest, the one holding more of its blocks
// (ties: the lower). A row spanning at most 4 binary orders has one window; an outlier column puts
// a block above the rest, and the low window leaves it out. Returns the window's start, 255 for a
// row without a block in any band; `bits`: the blocks inside it.
__device__ __forceinline__ u32 row_band(u32 x0, u32 x1, u32 &bits) {
  const u32 v0 = __vcmpne4(x0, 0xFFFFFFFFu), v1 = __vcmpne4(x1, 0xFFFFFFFFu);
  u32 mn = __vminu4(x0, x1), mx_ = __vmaxu4(__vadd4(x0, 0x01010101u), __vadd4(x1, 0x01010101u));  // 255 -> 0
  mn = __vminu4(mn, __byte_perm(mn, 0, 0x1032));
  mn = __vminu4(mn, __byte_perm(mn, 0, 0x2301));
  mx_ = __vmaxu4(mx_, __byte_perm(mx_, 0, 0x1032));
  mx_ = __vmaxu4(mx_, __byte_perm(mx_, 0, 0x2301));
  u32 lo = mn & 0xFFu;
  const u32 hi = (mx_ & 0xFFu) - 1u;  // the largest valid exponent (when lo != 255)
  u32 f0 = __vcmpleu4(x0, min(lo + 3u, 255u) * 0x01010101u) & v0, f1 = __vcmpleu4(x1, min(lo + 3u, 255u) * 0x01010101u) & v1;
  if (lo != 255u && hi - lo > 3u) {
    const u32 top = (hi - 3u) * 0x01010101u;
    const u32 g0 = __vcmpgeu4(x0, top) & v0, g1 = __vcmpgeu4(x1, top) & v1;
    if (__popc(g0) + __popc(g1) > __popc(f0) + __popc(f1)) {
      f0 = g0, f1 = g1;
      u32 m = __vminu4(x0 | ~g0, x1 | ~g1);  // the high window's smallest exponent
      m = __vminu4(m, __byte_perm(m, 0, 0x1032));
      lo = __vminu4(m, __byte_perm(m, 0, 0x2301)) & 0xFFu;
    }
  }
  f0 &= 0x01010101u, f1 &= 0x01010101u;
  bits = (f0 * 0x10204080u) >> 28 | ((f1 * 0x10204080u) >> 28) << 4;  // byte b's flag to bit b
  return lo;
}

// The AND of T tokens' band masks (bytes at `masks`), the same in every lane: the blocks inside the
// band of every one of them.
template <int T>
__device__ __forceinline__ u32 tokens_mask(const u8 *masks, int lane) {
  u32 m = 0xFFu;
#pragma unroll
  for (int i = 0; i < T / 32; ++i) m &= masks[32 * i + lane];
  return __reduce_and_sync(0xffffffffu, m);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(PREP_THREADS)
mxfp4_wgmma_prep(const u16 *__restrict__ A, int lda, int M, int K, const u8 *__restrict__ W,
                 const u8 *__restrict__ Wsc, int ldsc, int N, u8 *__restrict__ ablob, u8 *__restrict__ wblob,
                 int ntile, int a_ctas) {
  mx::pdl_launch_dependents();  // the GEMM may start now: it waits (griddepcontrol.wait) before reading
  const int nblk = K >> 5, nseg = (nblk + SEG - 1) / SEG;
  const int tid = threadIdx.x;
  __shared__ u32 shared_mask;
  if (tid == 0) shared_mask = 0xFFu;
  __syncthreads();
  if ((int)blockIdx.x < a_ctas) {
    // ---- A: tokens 8 * grp .. 8 * grp + 7 of tile `tile`, segment s; warp w takes one token, its lane
    // 4b + q quarter q of block b ----
    constexpr int WARPS = PREP_THREADS / 32;
    const int warp = tid >> 5, lane = tid & 31;
    const int grp = (int)blockIdx.x % (TN / WARPS), ts = (int)blockIdx.x / (TN / WARPS);
    const int tile = ts % ntile, s = ts / ntile;
    u8 *blob = ablob + ((long long)s * ntile + tile) * ABLOB;
    float *fold = (float *)(blob + S_M), *blk = fold + TN;
    u8 *tmask = (u8 *)(blk + SEG * TN);
    const int r = grp * WARPS + warp, b = lane >> 2, q = lane & 3;
    const int m = tile * TN + r, cb = s * SEG + b;
    uint4 va = make_uint4(0u, 0u, 0u, 0u);
    if (m < M && cb < nblk) va = *(const uint4 *)(A + (long long)m * lda + cb * 32 + q * 8);
    // The token's band (band_window) and mask: the blocks inside it (zero and NaN blocks fit any
    // band; blocks past K are outside).
    u32 sbyte;
    const u32 cs = mx::quantize8(va, sbyte);
    u32 nz = cs != 0u;
    nz |= __shfl_xor_sync(0xffffffffu, nz, 1);
    nz |= __shfl_xor_sync(0xffffffffu, nz, 2);
    const int e = (nz && sbyte != 255u) ? (int)sbyte : -1;
    const int lo = band_window(e);
    const bool inb = cb < nblk && (e < 0 || (e >= lo && e <= lo + 3));
    const u32 votes = __ballot_sync(0xffffffffu, inb);
    // The token's multiplier is 2**(its smallest nonzero exponent in the band - 128); the band's
    // blocks are shifted left by their exponent minus that (<= 3: int8), the others keep their own
    // multiplier. A NaN block makes every multiplier of its token NaN.
    const bool nan = sbyte == 255u;
    int emin = (inb && nz && !nan) ? (int)sbyte : 1000;
    u32 anynan = nan;
#pragma unroll
    for (int x = 4; x <= 16; x <<= 1) {
      emin = min(emin, __shfl_xor_sync(0xffffffffu, emin, x));
      anynan |= __shfl_xor_sync(0xffffffffu, anynan, x);
    }
    const float fm = anynan ? __uint_as_float(0x7fc00000u) : (emin == 1000 ? 0.0f : mx::half_scale((u32)emin));
    const u32 sh = (inb && !anynan && nz) ? (u32)((int)sbyte - emin) : 0u;
    const u32 w0 = shl_s8x4(mx::e2m1x4_to_s8x4(cs), sh), w1 = shl_s8x4(mx::e2m1x4_to_s8x4(cs >> 16), sh);
    u8 *row = blob + (b >> 2) * (TN * 128) + r * 128;  // blocks 0-3 in the first atom column, 4-7 in the second
    const int o0 = (b & 3) * 32 + 4 * q;
    *(u32 *)(row + mx::swz128(r, o0)) = w0;
    *(u32 *)(row + mx::swz128(r, o0 + 16)) = w1;
    if (q == 0) blk[b * TN + r] = (inb || anynan) ? fm : mx::half_scale(sbyte);
    if (lane == 0) {
      fold[r] = fm;
      u32 mask = 0;
#pragma unroll
      for (int c = 0; c < SEG; ++c) mask |= ((votes >> (4 * c)) & 1u) << c;
      tmask[r] = (u8)mask;
    }
  } else {
    // ---- W for mxfp4_gemm_i8: tile T (128 rows), segment s, as int8 in the layout wgmma reads
    // (A's: 128-byte swizzle, a block's elements permuted the same way), with the row's band
    // (row_band): the band's blocks shifted left by their exponent minus the band's smallest (<= 3),
    // per (block, row) multipliers, per row the accumulator start of the fold, the tile's mask ----
    __shared__ u64 rex[TW];
    __shared__ int rbase[TW];
    __shared__ u32 rband[TW];
    const int idx = (int)blockIdx.x - a_ctas, nwt = (N + TW - 1) / TW;
    const int T = idx % nwt, s = idx / nwt;
    u8 *blob = wblob + ((long long)T * nseg + s) * WBLOB;
    float *mult = (float *)(blob + W_MULT);
    u32 *magic = (u32 *)(blob + W_MAGIC);
    constexpr int NW = TW * SEG * 4 / PREP_THREADS;  // 4-byte code words a thread converts
    u32 word[NW];
#pragma unroll
    for (int i = 0; i < NW; ++i) {  // item: quarter q of row r16 of group grp, block b (128 contiguous bytes a warp)
      const int it = i * PREP_THREADS + tid, q = it & 3, r16 = (it >> 2) & 15, b = (it >> 6) & 7, grp = it >> 9;
      const int n = T * TW + grp * 16 + r16, cb = s * SEG + b;
      word[i] = (n < N && cb < nblk) ? *(const u32 *)(W + (long long)(n >> 4) * 8 * K + cb * 256 + r16 * 16 + q * 4)
                                     : 0u;
    }
    if (tid < TW) {
      const int n = T * TW + tid;
      u32 band = 0xFFu;
      int base = 0;
      u64 ex = 0;
      if (n < N) {
#pragma unroll
        for (int b = 0; b < SEG; ++b) {
          const int cb = s * SEG + b;
          const u32 e = cb < nblk ? Wsc[(long long)(n >> 5) * 32 * ldsc + (cb >> 3) * 256 + mx::shuffled_scale_offset(n, cb)]
                                  : 255u;
          ex |= (u64)e << (8 * b);
        }
        base = (int)row_band((u32)ex, (u32)(ex >> 32), band);  // the band's smallest exponent
        if (band == 0 || base > 232) band = 0, base = 0;  // the fold's start must be a normal float
      }
      rex[tid] = ex;
      rbase[tid] = base;
      rband[tid] = n < N ? band : 0u;
      magic[tid] = (u32)(0x4B400000 + (base - 128) * (1 << 23));
      atomicAnd(&shared_mask, band);
    }
    __syncthreads();
    for (int i = tid; i < SEG * TW; i += PREP_THREADS) {
      const int b = i / TW, r = i % TW;
      const u32 e = (u32)(rex[r] >> (8 * b)) & 0xFFu;
      mult[i] = ((rband[r] >> b) & 1u) ? mx::half_scale((u32)rbase[r]) : mx::half_scale(e);
    }
#pragma unroll
    for (int i = 0; i < NW; ++i) {
      const int it = i * PREP_THREADS + tid, q = it & 3, r16 = (it >> 2) & 15, b = (it >> 6) & 7, grp = it >> 9;
      const int r = grp * 16 + r16;
      const u32 sh = ((rband[r] >> b) & 1u) ? (u32)(((rex[r] >> (8 * b)) & 0xFFu) - (u32)rbase[r]) : 0u;
      const u32 w0 = shl_s8x4(mx::e2m1x4_to_s8x4(word[i]), sh), w1 = shl_s8x4(mx::e2m1x4_to_s8x4(word[i] >> 16), sh);
      u8 *row = blob + (b >> 2) * (TW * 128) + r * 128;
      const int o0 = (b & 3) * 32 + 4 * q;
      *(u32 *)(row + mx::swz128(r, o0)) = w0;
      *(u32 *)(row + mx::swz128(r, o0 + 16)) = w1;
    }
    if (tid == 0) *(u32 *)(blob + W_MASK) = shared_mask;
  }
}

// The consumers' promotion of a segment, shared by both GEMMs. A thread holds R / 4 pairs of weight
// rows (8j + 2t, 8j + 2t + 1 of its warpgroup's rows) for its two tokens: d[4j], d[4j + 1] the
// first token's, d[4j + 2], d[4j + 3] the second's.
// The fold's accumulator starts: each row's start bits (wmagic), for both tokens.
template <int R>
__device__ __forceinline__ void fold_start(int (&d)[R], const u32 *wmagic, int t) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const uint2 mg = *(const uint2 *)(wmagic + 8 * j + 2 * t);
    d[4 * j] = d[4 * j + 2] = (int)mg.x;
    d[4 * j + 1] = d[4 * j + 3] = (int)mg.y;
  }
}

// The fold's term: float(d) - start is the folded sum times the row's factor, exactly; one fma with
// the token's multiplier (fa0, fa1) adds it.
template <int R>
__device__ __forceinline__ void add_fold(float (&acc)[R], const int (&d)[R], const u32 *wmagic, int t, float fa0,
                                         float fa1) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const uint2 mg = *(const uint2 *)(wmagic + 8 * j + 2 * t);
    const float k0 = __uint_as_float(mg.x), k1 = __uint_as_float(mg.y);
    acc[4 * j] = fmaf(__int_as_float(d[4 * j]) - k0, fa0, acc[4 * j]);
    acc[4 * j + 1] = fmaf(__int_as_float(d[4 * j + 1]) - k1, fa0, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(__int_as_float(d[4 * j + 2]) - k0, fa1, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(__int_as_float(d[4 * j + 3]) - k1, fa1, acc[4 * j + 3]);
  }
}

// A block outside the fold (its sum started at 1.5 * 2**23): the sum times both multipliers, the
// rows' (wmult: the block's [TW] row of them) and the tokens' (sa0, sa1).
template <int R>
__device__ __forceinline__ void add_term(float (&acc)[R], const int (&d)[R], const float *wmult, int t, float sa0,
                                         float sa1) {
  const float k = 12582912.0f;
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const float2 sw = *(const float2 *)(wmult + 8 * j + 2 * t);
    acc[4 * j] = fmaf(__int_as_float(d[4 * j]) - k, sa0 * sw.x, acc[4 * j]);
    acc[4 * j + 1] = fmaf(__int_as_float(d[4 * j + 1]) - k, sa0 * sw.y, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(__int_as_float(d[4 * j + 2]) - k, sa1 * sw.x, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(__int_as_float(d[4 * j + 3]) - k, sa1 * sw.y, acc[4 * j + 3]);
  }
}

// The zero tokens' descriptor: one 8-row atom of zeros at `atom` (1 KiB, cleared here by consumer
// threads 0..63 of the 256, then made visible to wgmma), read for all 64 rows (a stride of 0
// between the 8-row groups).
__device__ __forceinline__ u64 zero_atom(u8 *atom, int ctid) {
  if (ctid < 1024 / 16) ((uint4 *)atom)[ctid] = make_uint4(0u, 0u, 0u, 0u);
  mx::fence_proxy_async();  // the zeros reach wgmma (the async proxy)
  mx::named_barrier(1, 256);
  return mx::desc_sw128(mx::smem_addr(atom)) & ~((u64)0x3FFF << 32);
}

// One segment of nb blocks into acc. fmask (warp-uniform, 0 or at least 2 blocks): the blocks that
// fold. The fold issues all 8 wgmma, a block outside it with the zero tokens (zero_desc) as its A: a
// wgmma under a test of its own makes ptxas fence each one, and each then waits for the one before.
// Every other block is a term of its own: its own wgmma from 1.5 * 2**23, then the sum times both
// multipliers. a_base, w_base: the segment's operands; fold: the tokens' fold multipliers [TN]; blk:
// their per-block multipliers [SEG][TN]; wmult: the rows' [SEG][TW]; wmagic: the rows' fold starts.
template <int R>
__device__ __forceinline__ void add_segment(float (&acc)[R], int (&d)[R], u32 fmask, int nb, u32 a_base, u32 w_base,
                                            u64 zero_desc, const u32 *wmagic, const float *wmult, const float *fold,
                                            const float *blk, int tok0, int tok1, int t) {
  if (fmask) {
    fold_start(d, wmagic, t);
    mx::wgmma_fence();
#pragma unroll
    for (int b = 0; b < SEG; ++b)
      mx::wgmma_ss_s8(d, (fmask >> b) & 1u ? mx::desc_sw128(a_base + (b >> 2) * (TN * 128) + (b & 3) * 32) : zero_desc,
                  mx::desc_sw128(w_base + (b >> 2) * (TW * 128) + (b & 3) * 32));
    mx::wgmma_commit();
    mx::wgmma_wait<0>();
    mx::fence_regs(d);
    add_fold(acc, d, wmagic, t, fold[tok0], fold[tok1]);
  }
  for (u32 rest = ((1u << nb) - 1u) & ~fmask; rest; rest &= rest - 1) {
    const int b = __ffs(rest) - 1;
#pragma unroll
    for (int j = 0; j < R; ++j) d[j] = 0x4B400000;
    mx::wgmma_fence();
    mx::wgmma_ss_s8(d, mx::desc_sw128(a_base + (b >> 2) * (TN * 128) + (b & 3) * 32),
                mx::desc_sw128(w_base + (b >> 2) * (TW * 128) + (b & 3) * 32));
    mx::wgmma_commit();
    mx::wgmma_wait<0>();
    mx::fence_regs(d);
    add_term(acc, d, wmult + b * TW, t, blk[b * TN + tok0], blk[b * TN + tok1]);
  }
}

// The int8 GEMM of the largest M (TN == 128): the weight comes as int8 from the prep as
// A does, so both operands stream through one ring by two bulk copies a stage and wgmma reads both
// from shared memory; the consumers convert nothing. A CTA owns 128 tokens (warpgroup c: tokens
// 64c .. 64c + 63) x 128 weight rows. A segment's blocks inside both bands (A's and W's masks)
// accumulate in one int32 sum started at the row's start bits (the fold, as mxfp4_gemm_cv's),
// scaled once by the token's multiplier; every other block is a term scaled by both multipliers.
extern "C" __global__ void __launch_bounds__(384, 1)
mxfp4_gemm_i8(const u8 *__restrict__ ablob, const u8 *__restrict__ wblob, out_t *__restrict__ C, int ldc, int M, int N,
              int K, int ntile, int nwt) {
#if TN == 128
  extern __shared__ __align__(1024) u8 smem_raw[];
  u8 *smem = smem_raw + mx::smem_pad_1024(smem_raw);
  u64 *full = (u64 *)(smem + ZERO8 + 1024), *empty = full + STAGES;
  {
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (u32)SMEM8) __trap();
  }
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nblk = K >> 5, nseg = (nblk + SEG - 1) / SEG;
  const int id = blockIdx.x, per_group = GM * nwt;
  const int grp = id / per_group, first = grp * GM, gsize = min(GM, ntile - first);
  const int local = id - grp * per_group;
  const int tT = first + local % gsize, tW = local / gsize;
  const int n0 = tW * TW, t0 = tT * TN;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&full[s], 1);
      mx::mbar_init(&empty[s], 256);
    }
    mx::fence_barrier_init();
  }
  __syncthreads();

  if (warp < 4) {
    mx::setmaxnreg_dec<40>();
    if (warp != 0) return;
    if (lane == 0) {
      mx::pdl_wait();  // both blobs come from the prep
      int stage = 0;
      u32 phase = 0;
      for (int s = 0; s < nseg; ++s) {
        mx::mbar_wait(&empty[stage], phase ^ 1);
        mx::fence_proxy_async();
        u8 *st = smem + stage * STAGE8;
        mx::mbar_arrive_expect_tx(&full[stage], (u32)(ABLOB + WBLOB));
        mx::bulk_copy(st, ablob + ((long long)s * ntile + tT) * ABLOB, (u32)ABLOB, &full[stage]);
        mx::bulk_copy(st + S8_W, wblob + ((long long)tW * nseg + s) * WBLOB, (u32)WBLOB, &full[stage]);
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }

  mx::setmaxnreg_inc<232>();
  const int c = (warp >> 2) - 1, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const int tok0 = 64 * c + 16 * wq + g, tok1 = tok0 + 8;  // this thread's two tokens (tile-local)
  int d[64];
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const int ctid = tid - 128;
  const u64 zero_desc = zero_atom(smem + ZERO8, ctid);
  int stage = 0;
  u32 phase = 0;
  for (int s = 0; s < nseg; ++s) {
    const int nb = min(SEG, nblk - s * SEG);
    mx::mbar_wait(&full[stage], phase);
    const u8 *st = smem + stage * STAGE8, *wst = st + S8_W;
    const float *fold = (const float *)(st + S_M), *blk = fold + TN;
    const float *wmult = (const float *)(wst + W_MULT);
    const u32 *wmagic = (const u32 *)(wst + W_MAGIC);
    // The mask of this warpgroup's 64 tokens and the weight tile's.
    u32 fmask = tokens_mask<64>(st + S_M + TN * (4 + 4 * SEG) + 64 * c, lane) & *(const u32 *)(wst + W_MASK) & 0xFFu;
    if (__popc(fmask) < 2) fmask = 0;
    // Warp-uniform as ptxas can see it: a branch on a value it takes for divergent around wgmma
    // serializes every wgmma of the kernel (warning C7520).
    fmask = __shfl_sync(0xffffffffu, fmask, 0);
    add_segment(acc, d, fmask, nb, mx::smem_addr(st) + 64 * c * 128, mx::smem_addr(wst), zero_desc, wmagic, wmult,
                fold, blk, tok0, tok1, t);
    mx::mbar_arrive(&empty[stage]);
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }

#if OUT_F32
  // ---- output: the float32 totals from registers, two columns a store (a warp's: 8 tokens x 32
  // bytes) ----
  const int m0 = t0 + tok0, m1 = t0 + tok1;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int n = n0 + 8 * j + 2 * t;
    if (n < N) {  // N % 16 == 0: a pair is whole
      if (m0 < M) *(float2 *)(C + (long long)m0 * ldc + n) = make_float2(acc[4 * j], acc[4 * j + 1]);
      if (m1 < M) *(float2 *)(C + (long long)m1 * ldc + n) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
#else
  // ---- output: staged in shared memory as [token][weight row], written in 16-byte pieces ----
  mx::named_barrier(1, 256);
  u16 *ct = (u16 *)smem;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int col = 8 * j + 2 * t;
    *(u32 *)(ct + tok0 * C_PITCH + col) = (u32)mx::float_to_bf16(acc[4 * j]) | ((u32)mx::float_to_bf16(acc[4 * j + 1]) << 16);
    *(u32 *)(ct + tok1 * C_PITCH + col) = (u32)mx::float_to_bf16(acc[4 * j + 2]) | ((u32)mx::float_to_bf16(acc[4 * j + 3]) << 16);
  }
  mx::named_barrier(1, 256);
  for (int p = ctid; p < TN * (TW / 8); p += 256) {
    const int tok = p / (TW / 8), ch = p % (TW / 8);
    const int m = t0 + tok, n = n0 + ch * 8;
    if (m < M && n < N)
      *(uint4 *)(C + (long long)m * ldc + n) = *(const uint4 *)(ct + tok * C_PITCH + ch * 8);
  }
#endif
#endif
}

// ---- mxfp4_gemm_cv: the weight converted to int8 in shared memory by a warpgroup of its own ----
// A CTA owns TN (64 or 128) tokens x 128 weight rows, 512 threads:
//   warp 0 (lane 0) streams the weight's codes as stored (the tensor map over its 16-row groups) into
//     the W ring (thread 0 issues the first STAGES copies before the CTA's barrier); warps 1 and 2 put
//     each row's eight exponent bytes of the segment beside them (from the scale bytes as stored);
//     warp 3 (lane 0) streams A's blobs from the prep into the A ring;
//   warpgroup 1, the converter: thread r owns weight row r; per segment the row's band (row_band),
//     its codes as int8 (its band's blocks shifted left by their exponent minus the band's smallest),
//     its multipliers and fold start, into a CV slot in the layout wgmma reads (A's: 128-byte swizzle,
//     a block's elements permuted the same way);
//   warpgroups 2 and 3, the consumers: wgmma with both operands in shared memory (TN 64: warpgroup c
//     64 tokens x weight rows 64c..64c+63, m64n64k32; TN 128: tokens 64c..64c+63 x 128 rows,
//     m64n128k32), then the fold and the terms as mxfp4_gemm_i8's.
// Three rings, so that each producer runs ahead of its consumer: the W ring (STAGES, codes from
// DRAM, released by the converter), the A ring (CV_ASTAGES blobs from L2, released by the consumers)
// and the CV ring (CV_SLOTS, filled by the converter, released by the consumers). At TN 64: 3 stages,
// 3 blobs, 3 slots (226,448 bytes); at TN 128: 4, 2, 2 (223,360).
#define CV_WSTAGE (8 * SEG * 256 + TW * 8)             // codes of 8 groups x SEG blocks, rows' exponents
#define CV_ASTAGES (TN == 64 ? 3 : 2)
#define CV_ASTAGE ((ABLOB + 1023) / 1024 * 1024)
#define CV_SLOTS (TN == 64 ? 3 : 2)
#define CV_SLOT ((WBLOB + 1023) / 1024 * 1024)         // int8 values, multipliers, starts, unit masks
#define CV_A (STAGES * CV_WSTAGE)
#define CV_C (CV_A + CV_ASTAGES * CV_ASTAGE)
#define CV_ZERO (CV_C + CV_SLOTS * CV_SLOT)            // an 8-row atom of zeros: the A of blocks outside the fold
#define CV_BAR (CV_ZERO + 1024)
#define CV_SMEM (1024 + CV_BAR + 2 * (STAGES + CV_ASTAGES + CV_SLOTS) * 8)
#define CV_NW (TN == 64 ? 64 : 128)                     // weight rows a consumer warpgroup covers
// Registers a thread at launch, then per warpgroup (setmaxnreg): the producers 40, the converter
// CV_REGS_CV, the consumers CV_REGS_MMA, within the CTA's 512 * CV_REGS. At 64 tokens a CTA takes
// 48K of the SM's 64K registers, so that a prep CTA (256 threads of 40) can run beside it (the
// weight's copies and conversions need nothing from the prep).
#define CV_REGS (TN == 64 ? 96 : 128)
#define CV_REGS_CV (TN == 64 ? 88 : 104)
#define CV_REGS_MMA (TN == 64 ? 128 : 184)
static_assert(128 * 40 + 128 * CV_REGS_CV + 256 * CV_REGS_MMA <= 512 * CV_REGS, "register pool");
static_assert(TN * C_PITCH * 2 <= CV_SLOTS * CV_SLOT, "the CV ring holds the staged output tile (K split)");

// prmt takes the low 16 bits of its selector; in inline PTX, so that the compiler does not narrow the
// selectors' 32-bit masks (which cost an extra operation a selector).
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// 8 codes (c: element j in nibble j) to int8, twice the e2m1 value shifted by the tables' shift:
// lo holds elements 0-3, hi elements 4-7. Tables (pl, ph) = 0 1 2 3 | 4 6 8 12 and (nl, nh) their
// negatives, each byte shifted left by the block's band shift (tests/test_cuda_jit.py checks every
// code and shift).
__device__ __forceinline__ void cvt8(u32 c, u32 pl, u32 ph, u32 nl, u32 nh, u32 &lo, u32 &hi) {
  const u32 idx = c & 0x77777777u;
  // Byte masks of the negative codes: code i's sign is bit 4i + 3, the top bit of byte i / 2 of c
  // (odd i) or of c << 4 (even i); prmt's sign-replicating selectors (8 | byte) spread it.
  const u32 c4 = c << 4;
  const u32 mlo = prmt(c4, c, 0xD9C8u), mhi = prmt(c4, c, 0xFBEAu);
  lo = (prmt(pl, ph, idx) & ~mlo) | (prmt(nl, nh, idx) & mlo);
  hi = (prmt(pl, ph, idx >> 16) & ~mhi) | (prmt(nl, nh, idx >> 16) & mhi);
}

extern "C" __global__ void __maxnreg__(CV_REGS)
mxfp4_gemm_cv(const u8 *__restrict__ ablob, const u8 *__restrict__ Wsc, int ldsc,
              const __grid_constant__ TensorMap wmap, out_t *__restrict__ C, int ldc, int M, int N, int K, int ntile,
              int nwt) {
// WgmmaParams.check: the W ring holds the output tile and the K split's partials.
#if (TN == 64 || TN == 128) && TN * C_PITCH * 2 <= STAGES * CV_WSTAGE && CV_NW * 256 * 2 <= STAGES * CV_WSTAGE
  extern __shared__ __align__(1024) u8 smem_raw[];
  u8 *smem = smem_raw + mx::smem_pad_1024(smem_raw);
  u64 *wfull = (u64 *)(smem + CV_BAR), *wempty = wfull + STAGES;
  u64 *afull = wempty + STAGES, *aempty = afull + CV_ASTAGES;
  u64 *cfull = aempty + CV_ASTAGES, *cempty = cfull + CV_SLOTS;
  {
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (u32)CV_SMEM) __trap();
  }
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nblk = K >> 5, nseg = (nblk + SEG - 1) / SEG;
  // K split over the S CTAs of a cluster (1, 1, S): this CTA takes the rank-th of S near-equal runs
  // of segments (the host keeps S <= nseg, so every run has one).
  const u32 S = mx::cluster_size(), rank = mx::cluster_rank();
  const int s_lo = (int)((long long)nseg * rank / S), cnt = (int)((long long)nseg * (rank + 1) / S) - s_lo;
  const int id = blockIdx.x, per_group = GM * nwt;
  const int grp = id / per_group, first = grp * GM, gsize = min(GM, ntile - first);
  const int local = id - grp * per_group;
  const int tT = first + local % gsize, tW = local / gsize;
  const int n0 = tW * TW, t0 = tT * TN;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&wfull[s], 1 + META_THREADS);  // the codes' expect_tx, the meta warps
      mx::mbar_init(&wempty[s], 128);               // the converter
    }
    for (int s = 0; s < CV_ASTAGES; ++s) {
      mx::mbar_init(&afull[s], 1);
      mx::mbar_init(&aempty[s], 256);  // every consumer thread releases its own reads
    }
    for (int s = 0; s < CV_SLOTS; ++s) {
      mx::mbar_init(&cfull[s], 128);
      mx::mbar_init(&cempty[s], 256);
    }
    mx::fence_barrier_init();
    // The first stages of codes go out now, before the CTA's barrier and register moves (they need
    // nothing from the prep).
    for (int i = 0; i < min(cnt, STAGES); ++i) {
      mx::mbar_arrive_expect_tx(&wfull[i], (u32)(8 * SEG * 256));
      mx::tma_copy_2d(smem + i * CV_WSTAGE, &wmap, (s_lo + i) * (SEG * 256 / 8), n0 / 16, &wfull[i]);
    }
  }
  __syncthreads();

  if (warp < 4) {
    mx::setmaxnreg_dec<40>();
    if (warp == 0) {
      // ---- the weight's codes, one TMA copy a stage after the first STAGES (issued above) ----
      if (lane == 0) {
        for (int i = STAGES; i < cnt; ++i) {
          const int stage = i % STAGES;
          mx::mbar_wait(&wempty[stage], ((i / STAGES) & 1) ^ 1);
          mx::fence_proxy_async();
          mx::mbar_arrive_expect_tx(&wfull[stage], (u32)(8 * SEG * 256));
          mx::tma_copy_2d(smem + stage * CV_WSTAGE, &wmap, (s_lo + i) * (SEG * 256 / 8), n0 / 16, &wfull[stage]);
        }
      }
    } else if (warp == 3) {
      // ---- A's blobs from the prep ----
      if (lane == 0) {
        mx::pdl_wait();
        int stage = 0;
        u32 phase = 0;
        for (int i = 0; i < cnt; ++i) {
          if (i >= CV_ASTAGES) {
            mx::mbar_wait(&aempty[stage], phase ^ 1);
            mx::fence_proxy_async();
          }
          mx::mbar_arrive_expect_tx(&afull[stage], (u32)ABLOB);
          mx::bulk_copy(smem + CV_A + stage * CV_ASTAGE, ablob + ((long long)(s_lo + i) * ntile + tT) * ABLOB,
                        (u32)ABLOB, &afull[stage]);
          if (++stage == CV_ASTAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    } else {
      // ---- each row's eight exponent bytes of the segment (one u64, byte 255 past K), warps 1 and
      // 2: a lane holds rows r and r + 16 of a 32-row unit (4 words, 64 bytes apart, in the shuffled
      // layout) ----
      const int unit = (tid - 32) >> 4, r16 = lane & 15;
      const int ra = 32 * unit + r16, rb = ra + 16;
      const bool va = n0 + ra < N, vb = n0 + rb < N;
      const u8 *src = Wsc + (long long)((n0 >> 5) + unit) * 32 * ldsc + 4 * r16;
      auto load = [&](int s, u32 (&w)[4]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = va ? *(const u32 *)(src + s * 256 + 64 * j) : 0u;
      };
      u32 wn[4];
      load(s_lo, wn);
      int stage = 0;
      u32 phase = 0;
      for (int i = 0; i < cnt; ++i) {
        const int s = s_lo + i;
        u32 w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = wn[j];
        if (i + 1 < cnt) load(s + 1, wn);
        const u32 t01 = __byte_perm(w[0], w[1], 0x5140), t23 = __byte_perm(w[2], w[3], 0x5140);
        const u32 u01 = __byte_perm(w[0], w[1], 0x7362), u23 = __byte_perm(w[2], w[3], 0x7362);
        const int nb = min(SEG, nblk - s * SEG);
        const u64 past = nb < SEG ? ~0ull << (8 * nb) : 0ull;
        u64 exa = ((u64)__byte_perm(u01, u23, 0x5410) << 32 | __byte_perm(t01, t23, 0x5410)) | past;
        u64 exb = ((u64)__byte_perm(u01, u23, 0x7632) << 32 | __byte_perm(t01, t23, 0x7632)) | past;
        if (!va) exa = 0;  // rows past N: zero codes (the copy's fill), any band
        if (!vb) exb = 0;
        if (i >= STAGES) mx::mbar_wait(&wempty[stage], phase ^ 1);
        u8 *st = smem + stage * CV_WSTAGE + 8 * SEG * 256;
        *(u64 *)(st + ra * 8) = exa;
        *(u64 *)(st + rb * 8) = exb;
        mx::mbar_arrive(&wfull[stage]);
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }

  if (warp < 8) {
    // ---- the converter: thread r, weight row r ----
    mx::setmaxnreg_dec<CV_REGS_CV>();  // the consumers take what it leaves
    const int r = tid - 128;
    const u8 *code_row = smem + (r >> 4) * (SEG * 256) + (r & 15) * 16;  // + stage, + block * 256
    for (int i = 0; i < cnt; ++i) {
      const int stage = i % STAGES, slot = i % CV_SLOTS;
      mx::mbar_wait(&wfull[stage], (i / STAGES) & 1);
      if (i >= CV_SLOTS) mx::mbar_wait(&cempty[slot], ((i / CV_SLOTS) & 1) ^ 1);
      const u8 *wst = smem + stage * CV_WSTAGE;
      u8 *cv = smem + CV_C + slot * CV_SLOT;
      const u64 ex = *(const u64 *)(wst + 8 * SEG * 256 + r * 8);
      uint4 code[SEG];  // every block's loads go out before the first conversion
#pragma unroll
      for (int b = 0; b < SEG; ++b) code[b] = *(const uint4 *)(code_row + stage * CV_WSTAGE + b * 256);
      u32 band;
      u32 base = row_band((u32)ex, (u32)(ex >> 32), band);
      if (band == 0 || base > 232u) band = 0, base = 0;  // the fold's start must be a normal float
      ((u32 *)(cv + W_MAGIC))[r] = 0x4B400000u + (base - 128u) * (1u << 23);
      const u32 umask = __reduce_and_sync(0xffffffffu, band);
      if (lane == 0) cv[W_MASK + (r >> 5)] = (u8)umask;
      // The multipliers: with every exponent byte of the row's segment in 2..254 (normal halves) a
      // float's bits are (e - 1) << 23, one multiply-add; otherwise mx::half_scale, whose branches in
      // this, the CTA's busiest warpgroup, cost 1-2.5% of a call (A/B runs on the H200).
      const float fb = mx::half_scale(base);
      float *mult = (float *)(cv + W_MULT) + r;
      const u32 lo2 = __vcmpgeu4((u32)ex, 0x02020202u) & __vcmpgeu4((u32)(ex >> 32), 0x02020202u);
      const u32 hi254 = __vcmpleu4((u32)ex, 0xFEFEFEFEu) & __vcmpleu4((u32)(ex >> 32), 0xFEFEFEFEu);
      if ((lo2 & hi254) == 0xFFFFFFFFu) {
#pragma unroll
        for (int b = 0; b < SEG; ++b)
          mult[b * TW] = (band >> b) & 1u ? fb : __uint_as_float(((u32)(ex >> (8 * b)) & 0xFFu) * (1u << 23) - (1u << 23));
      } else {
#pragma unroll
        for (int b = 0; b < SEG; ++b) mult[b * TW] = (band >> b) & 1u ? fb : mx::half_scale((u32)(ex >> (8 * b)) & 0xFFu);
      }
#pragma unroll
      for (int b = 0; b < SEG; ++b) {
        const u32 e = (u32)(ex >> (8 * b)) & 0xFFu;
        const bool in = (band >> b) & 1u;
        const u32 s = in ? e - base : 0u;
        const u32 keep = 0x01010101u * ((0xFFu << s) & 0xFFu);
        const u32 pl = 0x03020100u << s, ph = 0x0C080604u << s;
        const u32 nl = (0xFDFEFF00u << s) & keep, nh = (0xF4F8FAFCu << s) & keep;
        const uint4 c = code[b];
        uint4 o0, o1;
        cvt8(c.x, pl, ph, nl, nh, o0.x, o1.x);
        cvt8(c.y, pl, ph, nl, nh, o0.y, o1.y);
        cvt8(c.z, pl, ph, nl, nh, o0.z, o1.z);
        cvt8(c.w, pl, ph, nl, nh, o0.w, o1.w);
        u8 *row = cv + (b >> 2) * (TW * 128) + r * 128;
        *(uint4 *)(row + mx::swz128(r, (b & 3) * 32)) = o0;
        *(uint4 *)(row + mx::swz128(r, (b & 3) * 32 + 16)) = o1;
      }
      mx::mbar_arrive(&wempty[stage]);
      mx::fence_proxy_async();  // the int8 values reach wgmma (the async proxy) after the barrier
      mx::mbar_arrive(&cfull[slot]);
    }
    return;
  }

  // ---- consumers ----
  mx::setmaxnreg_inc<CV_REGS_MMA>();
  const int ctid = tid - 256, c = ctid >> 7, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const int tok_off = TN == 64 ? 0 : 64 * c, row_off = TN == 64 ? 64 * c : 0;
  const int tok0 = tok_off + 16 * wq + g, tok1 = tok0 + 8;  // this thread's two tokens (tile-local)
  int d[CV_NW / 2];
  float acc[CV_NW / 2];
#pragma unroll
  for (int i = 0; i < CV_NW / 2; ++i) acc[i] = 0.0f;
  const u64 zero_desc = zero_atom(smem + CV_ZERO, ctid);
  int astage = 0, slot = 0;
  u32 aphase = 0, cphase = 0;
  for (int i = 0; i < cnt; ++i) {
    const int s = s_lo + i, nb = min(SEG, nblk - s * SEG);
    mx::mbar_wait(&afull[astage], aphase);
    mx::mbar_wait(&cfull[slot], cphase);
    const u8 *st = smem + CV_A + astage * CV_ASTAGE, *cv = smem + CV_C + slot * CV_SLOT;
    const float *fold = (const float *)(st + S_M), *blk = fold + TN;
    const float *wmult = (const float *)(cv + W_MULT) + row_off;
    const u32 *wmagic = (const u32 *)(cv + W_MAGIC) + row_off;
    // The mask of this warpgroup's 64 tokens and of its weight rows' 32-row units.
    const u32 umasks = *(const u32 *)(cv + W_MASK);
    const u32 wmask = TN == 64 ? (umasks >> (16 * c)) & (umasks >> (16 * c + 8)) : umasks & (umasks >> 8) & (umasks >> 16) & (umasks >> 24);
    u32 fmask = tokens_mask<64>(st + S_M + TN * (4 + 4 * SEG) + tok_off, lane) & wmask & 0xFFu;
    if (__popc(fmask) < 2) fmask = 0;
    // Warp-uniform as ptxas can see it (a branch on a value it takes for divergent around wgmma
    // serializes every wgmma of the kernel, its note C7520).
    fmask = __shfl_sync(0xffffffffu, fmask, 0);
    add_segment(acc, d, fmask, nb, mx::smem_addr(st) + tok_off * 128, mx::smem_addr(cv) + row_off * 128, zero_desc,
                wmagic, wmult, fold, blk, tok0, tok1, t);
    mx::mbar_arrive(&aempty[astage]);
    mx::mbar_arrive(&cempty[slot]);
    if (++astage == CV_ASTAGES) {
      astage = 0;
      aphase ^= 1;
    }
    if (++slot == CV_SLOTS) {
      slot = 0;
      cphase ^= 1;
    }
  }

  // ---- K split: the S partial tiles added in rank order through distributed shared memory, each
  // rank adding and storing the S-th part of the tile (its accumulators j in [j0, j1)). The partials
  // go in the W ring, which no consumer reads and which is drained once the consumers have taken the
  // last CV slot (the converter read every stage before filling it); the output tile is staged in the
  // CV ring, drained too once every consumer has passed the first cluster barrier ----
  constexpr int J = CV_NW / 8;  // accumulator quads a thread
  int j0 = 0, j1 = J;
  if (S > 1) {
    float4 *part = (float4 *)smem;  // [J][256 consumer threads]
#pragma unroll
    for (int j = 0; j < J; ++j) part[j * 256 + ctid] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    mx::cluster_sync();  // every partial is written
    j0 = (int)(J * rank / S), j1 = (int)(J * (rank + 1) / S);
    for (u32 q = 0; q < S; ++q) {  // rank q's partial: its loads all go out before their adds
      float4 w[J];
#pragma unroll
      for (int j = 0; j < J; ++j) {
        if (j >= j0 && j < j1) {
          u32 remote;
          asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(mx::smem_addr(part + j * 256 + ctid)), "r"(q));
          asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                       : "=f"(w[j].x), "=f"(w[j].y), "=f"(w[j].z), "=f"(w[j].w) : "r"(remote) : "memory");
        }
      }
#pragma unroll
      for (int j = 0; j < J; ++j) {
        if (j >= j0 && j < j1) {  // rank 0's partial, then each next rank's added
          acc[4 * j] = q == 0 ? w[j].x : acc[4 * j] + w[j].x;
          acc[4 * j + 1] = q == 0 ? w[j].y : acc[4 * j + 1] + w[j].y;
          acc[4 * j + 2] = q == 0 ? w[j].z : acc[4 * j + 2] + w[j].z;
          acc[4 * j + 3] = q == 0 ? w[j].w : acc[4 * j + 3] + w[j].w;
        }
      }
    }
    // Every remote load above has returned (its value was used): the others may leave once they
    // pass their wait below.
    mx::cluster_arrive_relaxed();
  }

#if OUT_F32
  // ---- output: the float32 totals from registers, two columns a store ----
  const int m0 = t0 + tok0, m1 = t0 + tok1;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int n = n0 + row_off + 8 * j + 2 * t;
    if (j >= j0 && j < j1 && n < N) {  // N % 16 == 0: a pair is whole
      if (m0 < M) *(float2 *)(C + (long long)m0 * ldc + n) = make_float2(acc[4 * j], acc[4 * j + 1]);
      if (m1 < M) *(float2 *)(C + (long long)m1 * ldc + n) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
#else
  // ---- output: staged as [token][weight row] (S = 1: in the drained W ring; else in the CV ring, as
  // the W ring holds the partials the other ranks read), written in 16-byte pieces. The CV ring is
  // free once both consumer warpgroups are past their loops: the cluster barrier above orders that,
  // and this CTA barrier says it to compute-sanitizer's racecheck, which reported the staging's
  // writes against the other warpgroup's last reads of the multipliers (tn 128) without it ----
  if (S > 1) mx::named_barrier(1, 256);
  u16 *ct = (u16 *)(smem + (S > 1 ? CV_C : 0));
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (j >= j0 && j < j1) {
      const int col = row_off + 8 * j + 2 * t;
      *(u32 *)(ct + tok0 * C_PITCH + col) = (u32)mx::float_to_bf16(acc[4 * j]) | ((u32)mx::float_to_bf16(acc[4 * j + 1]) << 16);
      *(u32 *)(ct + tok1 * C_PITCH + col) = (u32)mx::float_to_bf16(acc[4 * j + 2]) | ((u32)mx::float_to_bf16(acc[4 * j + 3]) << 16);
    }
  }
  mx::named_barrier(1, 256);
  // This rank's 8-column chunks: j = chunk % J at TN 64 (the warpgroups' 64 rows each), the chunk at TN 128.
  for (int p = ctid; p < TN * (TW / 8); p += 256) {
    const int tok = p / (TW / 8), ch = p % (TW / 8), j = ch % J;
    const int m = t0 + tok, n = n0 + ch * 8;
    if (j >= j0 && j < j1 && m < M && n < N)
      *(uint4 *)(C + (long long)m * ldc + n) = *(const uint4 *)(ct + tok * C_PITCH + ch * 8);
  }
#endif
  if (S > 1) mx::cluster_wait();  // no CTA leaves while another reads its partial
#endif
}

