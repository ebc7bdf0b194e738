// C[M, N] (bf16) = dequant(quant(A)) @ dequant(W)^T for few rows and short K (KB = K / 32 blocks, a
// compile-time constant): one launch, no producer warp, no ring, no K split across CTAs.
//
// grid (N / (16 WG) rounded up to whole clusters, M / (8 MT) rounded up, 1) in clusters of (CL, 1, 1)
// along N: a CTA holds the tile of 8 MT token rows blockIdx.y * 8 MT.. (each tile re-reads the weight,
// from L2 after the first); a CTA has WG x KW warps. Warp (wg, kw) owns the 16-row weight group
// blockIdx.x * WG + wg and the kw-th of KW equal parts of K. Every thread first issues the loads of
// its CTA's share of its tile of A (1 / CL of it); then
// lane 0 of each warp starts a bulk copy (the copy engine) of its part of the weight's codes as stored
// (aiter's (16, 16) shuffle: a group's K range is contiguous) into shared memory, and thread 0 one of
// the CTA's 32-row units of scale bytes. The cluster quantizes A (aiter's rule, mx::quantize_loaded from
// A's dtype, A_KIND, the same bits as everywhere), each CTA its share, into every CTA's shared memory
// (distributed shared memory stores) as int8 twice the e2m1 value with a float32 half-scale per block;
// a cluster barrier publishes them. Each warp then waits for its own part of the weight and runs the unrolled loop from
// shared memory: per block its two words of codes become int8 (three byte-permutes per 4 codes),
// mma.sync m16n8k32 s8 gives exact int32 block sums (W the row operand, A the column operand) with
// the weight row's half-scale folded into the accumulator's start (warp_blocks; CTAs with a scale
// byte above 232 multiply both half-scales instead), and each scaled sum times A's half-scale is
// added to a float32 total. The KW warps of a group add their totals in kw order through shared
// memory; the total is rounded once.
//
// Why (H200, %globaltimer timelines, L2 flushed): the one-launch kernel of gemm_a4w4.cu spent its
// 6.3 us at 32x2880x512 in a serial chain of 200-600-cycle steps (64-bit divisions for the K split,
// barrier set-up, the producer's copies issued 1.7 us after entry, the ring's waits, the K split's
// cluster barriers and remote reads), not in memory. The first form of this kernel loaded the weight
// into registers, two 4-byte loads a block a thread: at 32x7168x2048 issuing them took 2.5 us and
// A's loads, issued after them, waited behind the weight's bytes, so A was ready 6.2 us after entry
// (16.4 us in all). With the weight's bulk copies issued after A's loads, A is ready at 4.1 us and
// the weight at 4.2 (14.7 us in all); when the copies were issued first, A's bytes queued behind them
// again (A quantized 4.2 us after entry), and A's shares pushed by bulk copies queued behind the
// weight's in the copy engine (ready at 7.3 us). The loop, 6.8 us there, is what remains: the fold
// of the weight's half-scale takes a multiply and the half-scale's decoding off each product
// (13.8 us against 14.8 in the same run; 31 table shapes 0.5-11% faster, the same bits). Tiles of
// tokens (grid.y) from 33 rows: 64x3072x1536 11.5 us against the decode kernels' 16.6, 64x4096x512
// 8.1 against the large-M kernels' 10.6; at 256x3072x1536 the loop takes 14 of 24 us (the large-M
// kernels: 20): the per-block promotion (a subtraction and an fma a product) bounds it, an IMMA with
// its promotion 18 cycles a scheduler against 7 for the IMMA alone (a probe of the instruction, 4 warps
// a scheduler; docs/design.md).
//
// Exactness: every block sum and every scaling is exact; the KB terms of an output are added in
// float32 in a fixed order (KB - 1 roundings of at most 2**-24 of the running magnitude), rounded once
// to bf16 (OUT_F32: stored unrounded). Domain: -147 <= ea + ew <= 112 for every block.
#include "cluster.cuh"
#include "hopper.cuh"
#include "mma.cuh"

#ifndef WG
#error "WG, KW, MT, KB and CL are set by the JIT"
#endif

namespace {

constexpr int NT = WG * KW * 32;             // threads
constexpr int TOK = MT * 8;                  // token rows of A a CTA holds: blockIdx.y * TOK.. (rows M.. zeros)
constexpr int KBW = KB / KW;                 // blocks a warp
constexpr int ITEMS = KB * TOK * 4;          // A's quarter blocks of a tile of tokens
constexpr int CITEMS = ITEMS / CL;           // ... that a CTA of the cluster quantizes
constexpr int IPT = (CITEMS + NT - 1) / NT;  // ... and a thread
constexpr int SCH = (KB + 7) / 8;            // 256-byte chunks of a 32-row scale unit that hold K's blocks
constexpr int SUNITS = (WG + 1) / 2;         // 32-row scale units a CTA's rows touch

// The dynamic shared memory of a CTA, the one definition (params.SmallParams.smem_bytes states the same
// sizes; tests/test_small.py checks it against mxfp4_small_smem_bytes below, read from the PTX). Byte
// offsets; the K parts' totals reuse A's values once the loop is done when they fit there.
struct Smem {
  static constexpr int A8 = 0;                        // A's int8 values [KB][TOK][32] (elements in order)
  static constexpr int SA = KB * TOK * 32;            // A's half-scales [KB][TOK]
  static constexpr int W = KB * TOK * 36;             // the weight's codes [WG groups][KB][256]
  static constexpr int S = W + WG * KB * 256;         // the scale units' chunks [SUNITS][SCH][256]
  static constexpr int BAR = S + SUNITS * SCH * 256;  // mbarriers: one a warp for its weight, one for the scales
  static constexpr int BARS = ((NT / 32 + 1) * 8 + 15) / 16 * 16;
  static constexpr int PART_BYTES = KW > 1 ? (KW - 1) * WG * MT * 512 : 0;  // [KW - 1][WG][MT][32 lanes] float4
  static constexpr int PART = PART_BYTES <= SA ? 0 : BAR + BARS;            // the K parts' totals
  static constexpr int BYTES = BAR + BARS + (PART == 0 ? 0 : PART_BYTES);
};

static_assert(MT >= 1 && MT <= 8, "MT must be in 1..8: at most 64 token rows a CTA");
static_assert(WG >= 1 && KW >= 1 && WG * KW <= 16, "WG * KW must be 1..16 warps");
static_assert(KB >= 1 && KB % KW == 0, "KB must be a positive multiple of KW (a group's warps split K evenly)");
static_assert(KBW <= 32, "at most 32 blocks a warp (its loop is unrolled over them)");
static_assert(CL == 1 || CL == 2 || CL == 4 || CL == 8, "CL must be 1, 2, 4 or 8 (a portable cluster)");
static_assert(ITEMS % (32 * CL) == 0, "A's quarter blocks must split into whole warps over the cluster");
static_assert(Smem::BYTES <= 227 * 1024, "the variant's shared memory exceeds the 227 KiB a CTA may have");

}  // namespace

extern "C" __constant__ u32 mxfp4_small_smem_bytes = Smem::BYTES;

// A warp's KBW blocks: per block its two words of codes to int8, MT MMAs, each block sum scaled into
// the totals (mx::block_mmas). FOLD (every scale byte e <= 232): the weight row's half-scale
// sw = 2**(e - 128) is folded into the accumulator's start, the bits of 1.5 * 2**23 * sw (a normal
// float), so d's bits are those of start + sum * sw exactly (|sum| < 2**22) and d - start is the
// block sum times sw: a subtraction and an fma with A's half-scale a product. Otherwise the start is
// 1.5 * 2**23 and the product is scaled by both half-scales (NaN included). Within the domain both
// give the same bits: sw * sa is exact, and each fma rounds the same exact product.
template <bool FOLD>
__device__ __forceinline__ void warp_blocks(float (&acc)[MT][4], const u8 *w_t, const u8 *s_t, const u8 *a_t,
                                            const float *sa_t, int kw, int na) {
#pragma unroll
  for (int b = 0; b < KBW; ++b) {
    const int cb = kw * KBW + b;
    u32 af[4];
    mx::weight_fragment(af, *(const u32 *)(w_t + b * 256), *(const u32 *)(w_t + b * 256 + 128));
    const u8 *sc = s_t + (cb >> 3) * 256;
    const u32 e0 = sc[mx::shuffled_scale_offset(na & 31, cb)], e1 = sc[mx::shuffled_scale_offset((na + 8) & 31, cb)];
    const u32 c0 = FOLD ? mx::fold_start(e0) : 0x4B400000u;  // rows na, na + 8
    const u32 c1 = FOLD ? mx::fold_start(e1) : 0x4B400000u;
    mx::block_mmas<MT, FOLD>(acc, af, a_t, sa_t, cb, c0, c1, mx::half_scale(e0), mx::half_scale(e1));
  }
}

extern "C" __global__ void __launch_bounds__(NT)
mxfp4_gemm_small(const a_t *__restrict__ A, int lda, const u8 *__restrict__ W, const u8 *__restrict__ Wsc, int ldsc,
                 out_t *__restrict__ C, int ldc, int M, int N, int K) {
  extern __shared__ __align__(16) u8 smem[];
  u8 *as8 = smem + Smem::A8;
  float *sa = (float *)(smem + Smem::SA);
  const u8 *wsm = smem + Smem::W;
  const u8 *ssm = smem + Smem::S;
  u64 *bar_w = (u64 *)(smem + Smem::BAR), *bar_s = bar_w + NT / 32;
  float *part = (float *)(smem + Smem::PART);
  if (K != KB * 32) __trap();  // the host launches this variant only for K = 32 KB
  mx::require_dynamic_smem(Smem::BYTES);
  const int m0 = blockIdx.y * TOK;  // this CTA's first token row (grid.y: M's tiles of TOK rows)

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wg = warp % WG, kw = warp / WG;
  const int grp0 = blockIdx.x * WG, grp = grp0 + wg;  // the CTA's first and this warp's 16-row group
  const bool live = grp * 16 < N;                      // N % 16 == 0 (the padded weight)
  const int unit0 = grp0 >> 1;                         // the CTA's first 32-row scale unit
  const int units = max(0, min(SUNITS, (N + 31) / 32 - unit0));  // ... and how many of its units exist
#if CL > 1
  const u32 crank = mx::cluster_rank();
#else
  const u32 crank = 0;
#endif

  if (tid == 0) {
    for (int w = 0; w <= NT / 32; ++w) mx::mbar_init(bar_w + w, 1);
    mx::fence_barrier_init();
  }
  __syncthreads();  // the mbarriers are initialized
#if CL > 1
  // Another CTA's shared memory may be written only once it runs: arrive now, wait before the first
  // remote store (by then every CTA of the cluster has arrived).
  mx::cluster_arrive_relaxed();
#endif

  // ---- this CTA's share of A, loaded first: item it is quarter q of (block b, token r),
  // it = (b * TOK + r) * 4 + q, so a block's four quarters sit in four consecutive lanes. With a
  // cluster each CTA quantizes CITEMS of them ----
  mx::Quarter<A_KIND> v[IPT];
#pragma unroll
  for (int i = 0; i < IPT; ++i) {
    const int it = (int)crank * CITEMS + i * NT + tid, b = it / (TOK * 4), r = (it >> 2) % TOK, q = it & 3;
    v[i] = mx::load_quarter<A_KIND>(A, (long long)(m0 + r) * lda + b * 32 + q * 8,
                                    i * NT + tid < CITEMS && m0 + r < M);
  }

  // ---- the bulk copies, issued after A's loads so that A's bytes are not queued behind the
  // weight's: lane 0 of each warp copies its part of the weight's codes (the groups that exist: the
  // grid's last CTAs may have fewer or none), thread 0 the 32-row units of scale bytes ----
  if (lane == 0) {
    if (live) {
      mx::mbar_arrive_expect_tx(bar_w + warp, KBW * 256);
      mx::bulk_copy((void *)(wsm + (wg * KB + kw * KBW) * 256), W + (long long)grp * 8 * K + kw * KBW * 256,
                    KBW * 256, bar_w + warp);
    } else {
      mx::mbar_arrive(bar_w + warp);
    }
  }
  if (tid == 0) {
    if (units > 0) {
      mx::mbar_arrive_expect_tx(bar_s, (u32)(units * SCH * 256));
      for (int u = 0; u < units; ++u)
        mx::bulk_copy((void *)(ssm + u * SCH * 256), Wsc + (long long)(unit0 + u) * 32 * ldsc, SCH * 256, bar_s);
    } else {
      mx::mbar_arrive(bar_s);
    }
  }

  // ---- A quantized into shared memory: with a cluster, each CTA's share into every CTA's shared
  // memory (distributed shared memory); the cluster barrier then publishes them ----
#if CL > 1
  mx::cluster_wait();
#endif
#pragma unroll
  for (int i = 0; i < IPT; ++i) {
    const int it = (int)crank * CITEMS + i * NT + tid;
    if (i * NT + warp * 32 < CITEMS) {  // warp-uniform: CITEMS is a multiple of 32
      u32 sbyte;
      const u32 codes = mx::quantize_loaded<A_KIND>(v[i], sbyte);
      const u32 lo = mx::e2m1x4_to_s8x4(codes), hi = mx::e2m1x4_to_s8x4(codes >> 16);
      const float hs = mx::half_scale(sbyte);
#if CL > 1
#pragma unroll
      for (u32 q = 0; q < CL; ++q) {
        mx::cluster_st_u32x2(mx::cluster_map(as8 + it * 8, q), lo, hi);
        if ((it & 3) == 0) mx::cluster_st_f32(mx::cluster_map(sa + (it >> 2), q), hs);
      }
#else
      *(uint2 *)(as8 + it * 8) = make_uint2(lo, hi);
      if ((it & 3) == 0) sa[it >> 2] = hs;
#endif
    }
  }
#if CL > 1
  mx::cluster_sync();  // every CTA's share of A is in every CTA's shared memory; no remote access follows
#else
  __syncthreads();
#endif
  mx::mbar_wait(bar_s, 0);
  // The weight's half-scales fold into the MMA's accumulator start (warp_blocks) unless a scale byte of
  // the CTA's units is above 232 (2**105 and up, or NaN): four bytes a test (bit 7 set and the low
  // seven bits above 104).
  bool big = false;
  for (int i = tid; i < units * SCH * 64; i += NT) {
    const u32 x = ((const u32 *)ssm)[i];
    big |= (((x & 0x7f7f7f7fu) + 0x17171717u) & x & 0x80808080u) != 0u;
  }
  const bool fold = !__syncthreads_or(big);
  mx::mbar_wait(bar_w + warp, 0);  // this warp's part of the weight is here

  // ---- the loop: per block, codes to int8, MT MMAs, each block sum scaled into the total ----
  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  const u8 *a_t = as8 + g * 32 + t * 8;
  const float *sa_t = sa + 2 * t;
  const u8 *w_t = wsm + (wg * KB + kw * KBW) * 256 + g * 16 + t * 4;
  const int na = grp * 16 + g;  // rows na and na + 8: the same half of their 32-row unit
  const u8 *s_t = ssm + ((na >> 5) - unit0) * SCH * 256;
  if (fold)
    warp_blocks<true>(acc, w_t, s_t, a_t, sa_t, kw, na);
  else
    warp_blocks<false>(acc, w_t, s_t, a_t, sa_t, kw, na);

  // ---- the KW parts of a group added in kw order, rounded once ----
#if KW > 1
  if (Smem::PART == 0) __syncthreads();  // the totals reuse A's bytes: every warp is past the loop
  if (kw > 0) {
    float4 *p = (float4 *)part + ((kw - 1) * WG + wg) * MT * 32 + lane;
#pragma unroll
    for (int j = 0; j < MT; ++j) p[j * 32] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  }
  __syncthreads();
  if (kw > 0) return;
#pragma unroll
  for (int q = 1; q < KW; ++q) {
    const float4 *p = (const float4 *)part + ((q - 1) * WG + wg) * MT * 32 + lane;
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      const float4 v = p[j * 32];
      acc[j][0] += v.x;
      acc[j][1] += v.y;
      acc[j][2] += v.z;
      acc[j][3] += v.w;
    }
  }
#endif
  if (!live) return;
  // Lane (g, t) holds tokens 8j + 2t, 8j + 2t + 1 of weight rows g and g + 8.
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int m = m0 + j * 8 + 2 * t + (e & 1), n = grp * 16 + g + (e >> 1) * 8;
      if (m < M) mx::store_out(C + (long long)m * ldc + n, acc[j][e]);
    }
}
