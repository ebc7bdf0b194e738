// C[M, N] (bf16) = dequant(quant(A)) @ dequant(W)^T for few rows (M <= 8 * MT <= 32) and short K
// (KB = K / 32 blocks, a compile-time constant): one launch, no producer warp, no ring, no K split
// across CTAs.
//
// grid (N / (16 WG) rounded up to whole clusters, 1, 1) in clusters of (CL, 1, 1) along N; a CTA has
// WG x KW warps. Warp (wg, kw) owns the 16-row weight group blockIdx.x * WG + wg and the kw-th of KW
// equal parts of K. Every thread first issues the loads of its whole share of the weight (its
// mma.sync fragment's bytes as stored, aiter's (16, 16) shuffle: two 4-byte words a block) and of its
// rows' scale bytes, so they are in flight together; meanwhile the cluster quantizes A (aiter's rule,
// quantize8, the same bits as everywhere), each CTA 1 / CL of it, into every CTA's shared memory as
// int8 twice the e2m1 value with a float32 half-scale per block. The loop then needs no barrier and
// no wait: per block the codes become int8 (three byte-permutes per 4 codes), mma.sync m16n8k32 s8
// gives exact int32 block sums (W the row operand, A the column operand), and each block sum times
// both half-scales is added to a float32 total. The KW warps of a group add their totals in kw order
// through shared memory; the total is rounded once.
//
// Why (H200, %globaltimer and clock64 timelines of the one-launch kernel of gemm_a4w4.cu at
// 32x2880x512, L2 flushed or warm alike): its 6.3 us are a serial chain of steps of 200-600 cycles
// each (64-bit divisions for the K split, barrier set-up, the producer's copies issued 1.7 us after
// entry, the chunk's quantization, the ring's waits, the cluster barriers and the remote reads of
// the K split's partials), not memory. Here the chain is: loads issued, A quantized and stored
// (a cluster barrier's wait before the remote stores, one cluster barrier after them), the unrolled
// loop, one CTA barrier for the K parts, the stores.
//
// Exactness: every block sum and every scaling is exact; the KB terms of an output are added in
// float32 in a fixed order (KB - 1 roundings of at most 2**-24 of the running magnitude), rounded once
// to bf16 (OUT_F32: stored unrounded). Domain: -147 <= ea + ew <= 112 for every block.
#include "mxfp4.cuh"

#ifndef WG
#error "WG, KW, MT, KB and CL are set by the JIT"
#endif

#define NT (WG * KW * 32)  // threads
#define TOK (MT * 8)       // token rows of A in shared memory (rows M.. are zeros)
#define KBW (KB / KW)      // blocks a warp
#define ITEMS (KB * TOK * 4)
#define CITEMS (ITEMS / CL)          // A's quarter blocks a CTA of the cluster quantizes
#define IPT ((CITEMS + NT - 1) / NT)  // ... and a thread

static_assert(KB % KW == 0, "K's blocks split evenly over the KW warps of a group");
static_assert(MT >= 1 && MT <= 4, "at most 32 token rows");
static_assert(CITEMS % 32 == 0, "a cluster's CTAs quantize whole warps' worth of A");

// Stores into the shared memory of CTA `rank` of the cluster, at the offset of `p` in ours.
__device__ __forceinline__ void st_cluster_u32x2(void *p, u32 rank, u32 x, u32 y) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(mx::smem_addr(p)), "r"(rank));
  asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(remote), "r"(x), "r"(y) : "memory");
}
__device__ __forceinline__ void st_cluster_f32(void *p, u32 rank, float x) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(mx::smem_addr(p)), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(x) : "memory");
}

extern "C" __global__ void __launch_bounds__(NT)
mxfp4_gemm_small(const u16 *__restrict__ A, int lda, const u8 *__restrict__ W, const u8 *__restrict__ Wsc, int ldsc,
                 out_t *__restrict__ C, int ldc, int M, int N, int K) {
  __shared__ __align__(16) u8 as8[KB * TOK * 32];  // [block][token][32] int8, elements in order
  __shared__ __align__(16) float sa[KB * TOK];     // [block][token] half-scales
  __shared__ __align__(16) float part[KW > 1 ? (KW - 1) * WG * MT * 128 : 4];
  if (K != KB * 32 || M > TOK) __trap();  // the host launches this variant only for K = 32 KB, M <= TOK

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wg = warp % WG, kw = warp / WG;
  const int grp = blockIdx.x * WG + wg;  // this warp's 16-row weight group
  const bool live = grp * 16 < N;        // N % 16 == 0 (the padded weight)
#if CL > 1
  // Another CTA's shared memory may be written only once it runs: arrive now, wait before the first
  // remote store (by then every CTA of the cluster has arrived).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif

  // ---- the weight's fragments and scale bytes of this warp's part, all loads in flight ----
  u32 wlo[KBW], whi[KBW], sba[KBW], sbb[KBW];
  {
    const u8 *wp = W + (long long)grp * 8 * K + kw * KBW * 256 + g * 16 + t * 4;
    const int na = grp * 16 + g;  // rows na and na + 8; the same half of their 32-row unit
    const u8 *sp = Wsc + (long long)(na >> 5) * 32 * ldsc;
#pragma unroll
    for (int b = 0; b < KBW; ++b) {
      const int cb = kw * KBW + b;
      wlo[b] = live ? __ldg((const unsigned int *)(wp + b * 256)) : 0u;
      whi[b] = live ? __ldg((const unsigned int *)(wp + b * 256 + 128)) : 0u;
      const u8 *s = sp + (cb >> 3) * 256;
      sba[b] = live ? (u32)s[mx::shuffled_scale_offset(na & 31, cb)] : 0u;
      sbb[b] = live ? (u32)s[mx::shuffled_scale_offset((na + 8) & 31, cb)] : 0u;
    }
  }

  // ---- A quantized into shared memory: item it is quarter q of (block b, token r),
  // it = (b * TOK + r) * 4 + q, so a block's four quarters sit in four consecutive lanes. With a
  // cluster (CL CTAs along N) each CTA quantizes CITEMS of them and stores them into every CTA's
  // shared memory (distributed shared memory); the cluster barrier then publishes them ----
  {
#if CL > 1
    const u32 crank = mx::cluster_rank();
#else
    const u32 crank = 0;
#endif
    uint4 v[IPT];
#pragma unroll
    for (int i = 0; i < IPT; ++i) {
      const int it = (int)crank * CITEMS + i * NT + tid, b = it / (TOK * 4), r = (it >> 2) % TOK, q = it & 3;
      v[i] = make_uint4(0u, 0u, 0u, 0u);
      if (i * NT + tid < CITEMS && r < M) v[i] = *(const uint4 *)(A + (long long)r * lda + b * 32 + q * 8);
    }
#if CL > 1
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
#pragma unroll
    for (int i = 0; i < IPT; ++i) {
      const int it = (int)crank * CITEMS + i * NT + tid;
      if (i * NT + warp * 32 < CITEMS) {  // warp-uniform: CITEMS is a multiple of 32
        u32 sbyte;
        const u32 codes = mx::quantize8(v[i], sbyte);
        const u32 lo = mx::e2m1x4_to_s8x4(codes), hi = mx::e2m1x4_to_s8x4(codes >> 16);
        const float hs = mx::half_scale(sbyte);
#if CL > 1
#pragma unroll
        for (u32 q = 0; q < CL; ++q) {
          st_cluster_u32x2(as8 + it * 8, q, lo, hi);
          if ((it & 3) == 0) st_cluster_f32(sa + (it >> 2), q, hs);
        }
#else
        *(uint2 *)(as8 + it * 8) = make_uint2(lo, hi);
        if ((it & 3) == 0) sa[it >> 2] = hs;
#endif
      }
    }
  }
#if CL > 1
  mx::cluster_sync();  // every CTA's share of A is in every CTA's shared memory; no remote access follows
#else
  __syncthreads();
#endif

  // ---- the loop: per block, codes to int8, MT MMAs, each block sum scaled into the total ----
  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  const u8 *a_t = as8 + g * 32 + t * 8;
  const float *sa_t = sa + 2 * t;
#pragma unroll
  for (int b = 0; b < KBW; ++b) {
    const int cb = kw * KBW + b;
    u32 af[4];
    af[0] = mx::e2m1x4_to_s8x4(wlo[b]);
    af[1] = mx::e2m1x4_to_s8x4(whi[b]);
    af[2] = mx::e2m1x4_to_s8x4(wlo[b] >> 16);
    af[3] = mx::e2m1x4_to_s8x4(whi[b] >> 16);
    const float sw0 = mx::half_scale(sba[b]), sw1 = mx::half_scale(sbb[b]);
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      const uint2 bv = *(const uint2 *)(a_t + (cb * TOK + j * 8) * 32);
      const float2 sav = *(const float2 *)(sa_t + cb * TOK + j * 8);
      int d[4];
      mx::mma_s8(d, af, bv.x, bv.y, 0x4B400000);
      const float k = 12582912.0f;  // the accumulator starts at 1.5 * 2**23: d's bits are k + sum
      acc[j][0] = fmaf(__int_as_float(d[0]) - k, sw0 * sav.x, acc[j][0]);
      acc[j][1] = fmaf(__int_as_float(d[1]) - k, sw0 * sav.y, acc[j][1]);
      acc[j][2] = fmaf(__int_as_float(d[2]) - k, sw1 * sav.x, acc[j][2]);
      acc[j][3] = fmaf(__int_as_float(d[3]) - k, sw1 * sav.y, acc[j][3]);
    }
  }

  // ---- the KW parts of a group added in kw order, rounded once ----
#if KW > 1
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
      const int m = j * 8 + 2 * t + (e & 1), n = grp * 16 + g + (e >> 1) * 8;
      if (m < M)
#if OUT_F32
        C[(long long)m * ldc + n] = acc[j][e];
#else
        C[(long long)m * ldc + n] = mx::float_to_bf16(acc[j][e]);
#endif
    }
}
