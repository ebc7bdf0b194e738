// C[M, N] (bf16) = dequant(quant(A)) @ dequant(W)^T for bf16 A [M, K] and an MXFP4 weight W [N, K] in
// aiter's (16, 16) shuffled layout with aiter's shuffled e8m0 scales. One launch:
//
// grid (ceil(N / BN), ceil(M / BM), S) in clusters of (1, 1, S); the S CTAs of a cluster split K and
// add their partial tiles through distributed shared memory, in rank order (deterministic). One
// producer warp streams the weight with bulk copies (copy engine) into a ring of STAGES stages of SB
// blocks, and the weight's scale bytes per chunk of KC blocks (two buffers). The WARPS_N x WARPS_M
// consumer warps first quantize the chunk's A rows (aiter's rule, the device function quantize8 that
// mxfp4.quantize runs too) into shared memory as int8 twice the e2m1 value with a float32 half-scale
// per block, while the weight streams in. Then each warp converts the weight's codes to int8 (twice
// the value) per 32-element block, multiplies on the int8 tensor cores (m16n8k32: exact int32 block
// sums; W is the row operand, A the column operand), scales each block sum by the two half-scales in
// float32 (exact products), adds up to 8 blocks in float32, then into float64.
//
// Exactness: every block sum and every scaling is exact; each float32 run of <= 8 terms rounds at
// most 7 times (error <= 7 * 2**-24 of the sum of magnitudes), float64 does the rest, and the
// result is rounded once to bf16. The domain: -147 <= ea + ew <= 114 for every block (the scale
// 2**(ea + ew - 2) is a float32 number; a run of 8 terms of |d| <= 4608 times it stays finite).
#include "mxfp4.cuh"

#ifndef BN
#error "BN, BM, WARPS_N, WARPS_M, KC, SB and STAGES are set by the JIT"
#endif
// OUT_F32 1 (out_t, mxfp4.cuh): C is float32, the float64 total rounded to nearest float32 instead of
// to bf16. Only the final store differs.

#define NCW (WARPS_N * WARPS_M)   // consumer warps
#define NCT (NCW * 32)            // consumer threads
#define WN (BN / WARPS_N)         // weight rows per consumer warp
#define WM (BM / WARPS_M)         // A rows per consumer warp
#define TI (WN / 16)              // MMA tiles along N per warp
#define TJ (WM / 8)               // MMA tiles along M per warp
#define NGRP (BN / 16)            // 16-row weight groups per CTA
#define NSG (BN / 32)             // 32-row scale groups per CTA
#define SUNITS ((KC + 6) / 8 + 1) // 8-block scale units a chunk can touch
#define FLUSH 8                   // blocks per float32 run

#define W_STAGE (NGRP * SB * 256)
#define A_SA (KC * BM * 32)                      // in an A buffer: A's int8 values, its half-scales,
#define A_WSB (A_SA + KC * BM * 4)               // then the weight's scale bytes
#define A_BUF (A_WSB + NSG * SUNITS * 256)
#define OFF_A (STAGES * W_STAGE)
#define OFF_SW (OFF_A + 2 * A_BUF)
#define BODY_BYTES (OFF_SW + KC * BN * 4)
#define NBARS (2 * STAGES + 4)
#define SMEM_BYTES ((BODY_BYTES > BM * BN * 8 ? BODY_BYTES : BM * BN * 8) + NBARS * 8)

static_assert(BN % 32 == 0 && WN % 16 == 0 && WM % 8 == 0, "tile shape");
static_assert(BN == WN * WARPS_N && BM == WM * WARPS_M, "warp tiling");
static_assert(KC % SB == 0, "a chunk holds whole stages");

// Quantizes the chunk's A rows m0 .. m0 + BM - 1, blocks cb0 .. cb0 + kc - 1, into the chunk's
// buffer: int8 values [kc][BM][32] and half-scales [kc][BM]. Item `it` is a quarter q of block
// (b, r), it = (b * BM + r) * 4 + q, so its 8 values land at byte it * 8 and a block's four quarters
// sit in four consecutive lanes (quantize8 reduces the amax across them). Rows past M quantize zeros.
// Loads go out QB at a time before any is used, so their latencies overlap (fewer with more
// threads, which have fewer registers each).
#define QB (NCT >= 512 ? 4 : 8)
__device__ __forceinline__ void quantize_chunk(const u16 *__restrict__ A, int lda, int M, int m0, int cb0, int kc,
                                               u8 *as8, float *sa, int tid) {
  const int items = kc * BM * 4;
  for (int base = 0; base < items; base += QB * NCT) {
    uint4 v[QB];
#pragma unroll
    for (int u = 0; u < QB; ++u) {
      const int it = base + u * NCT + tid;
      const int b = it / (BM * 4), r = (it >> 2) % BM, q = it & 3;
      v[u] = make_uint4(0u, 0u, 0u, 0u);
      if (it < items && m0 + r < M)
        v[u] = *(const uint4 *)(A + (long long)(m0 + r) * lda + (cb0 + b) * 32 + q * 8);
    }
#pragma unroll
    for (int u = 0; u < QB; ++u) {
      const int it = base + u * NCT + tid;
      if (base + u * NCT < items) {  // the same for every lane: the shuffles see all four quarters
        u32 sbyte;
        const u32 codes = mx::quantize8(v[u], sbyte);
        if (it < items) {
          *(uint2 *)(as8 + it * 8) = make_uint2(mx::e2m1x4_to_s8x4(codes), mx::e2m1x4_to_s8x4(codes >> 16));
          if ((it & 3) == 0) sa[it >> 2] = mx::half_scale(sbyte);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(NCT + 32, 1)
mxfp4_gemm_a4w4(const u16 *__restrict__ A, int lda, const u8 *__restrict__ W, const u8 *__restrict__ Wsc,
                int ldsc, out_t *__restrict__ C, int ldc, int M, int N, int K) {
  extern __shared__ __align__(128) u8 smem[];
  u8 *ring = smem;
  float *sw = (float *)(smem + OFF_SW);
  u64 *bars = (u64 *)(smem + (SMEM_BYTES - NBARS * 8));  // after everything, the partial tile too
  u64 *full = bars, *empty = bars + STAGES, *a_full = bars + 2 * STAGES, *a_empty = a_full + 2;

  {
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (u32)SMEM_BYTES) __trap();
  }

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // A consumer warp's place in the tile (wn, wm) and its lane's place in an MMA fragment: row
  // group g, thread-in-group t. The MMA loop and the partial-tile write-out share them.
  const int wn = warp % WARPS_N, wm = warp / WARPS_N;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const u32 S = mx::cluster_size(), rank = mx::cluster_rank();
  const int nblk = K >> 5;
  const int kb_begin = (int)((long long)nblk * rank / S);
  const int kb_end = (int)((long long)nblk * (rank + 1) / S);
  const int nchunks = (kb_end - kb_begin + KC - 1) / KC;
  const int grps_valid = min(NGRP, (N - n0) >> 4);

  // A's part for this CTA goes to L2 before the weight's bulk copies fill the memory queues: the
  // quantization waits for A, the first MMA for both.
  if (warp < NCW) {
    const int units = (kb_end - kb_begin) * 2;  // 64-byte units per row
    const int rows = min(BM, M - m0);
    for (int it = tid; it < rows * units; it += NCT) {
      const int r = it / units, u = it - r * units;
      mx::prefetch_l2(A + (long long)(m0 + r) * lda + kb_begin * 32 + u * 32);
    }
  }

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&full[s], 1);
      mx::mbar_init(&empty[s], NCT);  // every consumer thread releases its own reads
    }
    for (int s = 0; s < 2; ++s) {
      mx::mbar_init(&a_full[s], 1);
      mx::mbar_init(&a_empty[s], NCT);
    }
    mx::fence_barrier_init();
  }
  __syncthreads();

  double acc64[TI][TJ][4] = {};

  if (warp == NCW) {
    // ---- producer: the weight's codes (ring) and scale bytes (per chunk) ----
    int stage = 0;
    u32 phase = 0;
    for (int c = 0; c < nchunks; ++c) {
      const int cb0 = kb_begin + c * KC;
      const int kc = min(KC, kb_end - cb0);
      const int u0 = cb0 >> 3, u1 = (cb0 + kc - 1) >> 3;
      const u32 sbytes = (u32)(u1 - u0 + 1) * 256u;
      u8 *wsb = smem + OFF_A + (c & 1) * A_BUF + A_WSB;
      mx::mbar_wait(&a_empty[c & 1], ((c >> 1) & 1) ^ 1);
      mx::fence_proxy_async();  // the consumers' reads of this buffer come before the copies
      if (lane == 0) mx::mbar_arrive_expect_tx(&a_full[c & 1], NSG * sbytes);
      __syncwarp();
      for (int q = lane; q < NSG; q += 32)
        mx::bulk_copy(wsb + q * (SUNITS * 256), Wsc + (long long)(n0 / 32 + q) * 32 * ldsc + u0 * 256, sbytes,
                      &a_full[c & 1]);
      for (int b = 0; b < kc; b += SB) {
        const int nb = min(SB, kc - b);
        mx::mbar_wait(&empty[stage], phase ^ 1);  // every issuing lane sees the slot released
        mx::fence_proxy_async();
        if (lane == 0) mx::mbar_arrive_expect_tx(&full[stage], (u32)(grps_valid * nb * 256));
        __syncwarp();
        for (int q = lane; q < grps_valid; q += 32)
          mx::bulk_copy(ring + stage * W_STAGE + q * (SB * 256),
                        W + (long long)(n0 / 16 + q) * 8 * K + (cb0 + b) * 256, (u32)nb * 256u, &full[stage]);
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
  } else {
    // ---- consumers ----
    float acc[TI][TJ][4] = {};
    auto flush = [&]() {  // the float32 run into float64
#pragma unroll
      for (int i = 0; i < TI; ++i)
#pragma unroll
        for (int j = 0; j < TJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc64[i][j][e] += (double)acc[i][j][e];
            acc[i][j][e] = 0.0f;
          }
    };
    int stage = 0;
    u32 phase = 0;
    int run = 0;
    for (int c = 0; c < nchunks; ++c) {
      const int cb0 = kb_begin + c * KC;
      const int kc = min(KC, kb_end - cb0);
      const int u0 = cb0 >> 3;
      u8 *as8 = smem + OFF_A + (c & 1) * A_BUF;
      float *sa = (float *)(as8 + A_SA);
      const u8 *wsb = as8 + A_WSB;
      quantize_chunk(A, lda, M, m0, cb0, kc, as8, sa, tid);
      mx::mbar_wait(&a_full[c & 1], (c >> 1) & 1);
      // The weight's half-scales of the chunk, from aiter's shuffled scale layout.
      for (int it = tid; it < BN * kc; it += NCT) {
        const int b = it / BN, n = it % BN;
        const int cb = cb0 + b, grp = n >> 5, rr = n & 31;
        const int off = grp * (SUNITS * 256) + ((cb >> 3) - u0) * 256 + mx::shuffled_scale_offset(rr, cb);
        sw[b * BN + n] = mx::half_scale(wsb[off]);
      }
      mx::named_barrier(1, NCT);

      // Per-thread views: the weight fragment (row g, 4 bytes at t), A (row g of the 8-row tile,
      // 8 bytes at t), A's half-scales (rows 2t, 2t + 1), the weight's half-scales (rows g, g + 8).
      const u8 *a_t = as8 + (wm * WM + g) * 32 + t * 8;
      const float *sa_t = sa + wm * WM + 2 * t;
      const float *sw_t = sw + wn * WN + g;
      // One stage (SB blocks) at a time, unrolled, so the loads and conversions of one block
      // overlap the MMAs of another. A float32 run ends before it would pass FLUSH blocks.
      for (int b0 = 0; b0 < kc; b0 += SB) {
        mx::mbar_wait(&full[stage], phase);
        if (run + SB > FLUSH) {
          flush();
          run = 0;
        }
        const u8 *ws = ring + stage * W_STAGE + g * 16 + t * 4 + wn * TI * (SB * 256);
        // One block of the stage: its codes to int8, TJ x TI MMAs, each block sum scaled into the run.
        auto block = [&](int bs) {
          const int b = b0 + bs;
          u32 af[TI][4];
          float swv[TI][2];
#pragma unroll
          for (int i = 0; i < TI; ++i) {
            const u8 *p = ws + i * (SB * 256) + bs * 256;
            const u32 lo = *(const u32 *)p, hi = *(const u32 *)(p + 128);
            af[i][0] = mx::e2m1x4_to_s8x4(lo);
            af[i][1] = mx::e2m1x4_to_s8x4(hi);
            af[i][2] = mx::e2m1x4_to_s8x4(lo >> 16);
            af[i][3] = mx::e2m1x4_to_s8x4(hi >> 16);
            swv[i][0] = sw_t[b * BN + i * 16];
            swv[i][1] = sw_t[b * BN + i * 16 + 8];
          }
#pragma unroll
          for (int j = 0; j < TJ; ++j) {
            const uint2 bv = *(const uint2 *)(a_t + (b * BM + j * 8) * 32);
            const float2 sav = *(const float2 *)(sa_t + b * BM + j * 8);
#pragma unroll
            for (int i = 0; i < TI; ++i) {
              int d[4];
              mx::mma_s8(d, af[i], bv.x, bv.y, 0x4B400000);
              const float k = 12582912.0f;  // the accumulator starts at 1.5 * 2**23: d's bits are k + sum
              acc[i][j][0] = fmaf(__int_as_float(d[0]) - k, swv[i][0] * sav.x, acc[i][j][0]);
              acc[i][j][1] = fmaf(__int_as_float(d[1]) - k, swv[i][0] * sav.y, acc[i][j][1]);
              acc[i][j][2] = fmaf(__int_as_float(d[2]) - k, swv[i][1] * sav.x, acc[i][j][2]);
              acc[i][j][3] = fmaf(__int_as_float(d[3]) - k, swv[i][1] * sav.y, acc[i][j][3]);
            }
          }
        };
        // A whole stage runs without a test per block, so the compiler interleaves its SB blocks'
        // loads, conversions, MMAs and epilogues (a guarded block was a basic block of its own:
        // one block's dependency chain at a time); only K's last stage may be short.
        if (b0 + SB <= kc) {
#pragma unroll
          for (int bs = 0; bs < SB; ++bs) block(bs);
        } else {
          for (int bs = 0; bs < kc - b0; ++bs) block(bs);
        }
        run += min(SB, kc - b0);
        mx::mbar_arrive(&empty[stage]);
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      mx::named_barrier(1, NCT);  // the buffer and sw are free for the next chunks
      mx::mbar_arrive(&a_empty[c & 1]);
    }
    flush();
  }

  // ---- partial tiles, added across the cluster in rank order ----
  __syncthreads();  // the partial tile aliases the ring and the A buffers
  double *P = (double *)smem;
  if (warp < NCW) {
#pragma unroll
    for (int i = 0; i < TI; ++i)
#pragma unroll
      for (int j = 0; j < TJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = wn * WN + i * 16 + g + (e >> 1) * 8;
          const int m = wm * WM + j * 8 + 2 * t + (e & 1);
          P[m * BN + n] = acc64[i][j][e];
        }
  }
  if (S > 1)
    mx::cluster_sync();  // the partial tiles are written, in every CTA of the cluster
  else
    __syncthreads();
  // This CTA's rows of the tile (rank, rank + S, ...), two columns a thread: the S partials are
  // added in rank order and rounded once. U pairs per thread go out together, so the remote loads
  // overlap.
  constexpr int U = 4;
  const int my_rows = (BM - (int)rank + (int)S - 1) / (int)S;
  const int pairs = my_rows * (BN / 2);
  for (int p0 = tid; p0 < pairs; p0 += U * (NCT + 32)) {
    double2 sum[U];
#pragma unroll
    for (int u = 0; u < U; ++u) sum[u] = make_double2(0.0, 0.0);
    for (u32 q = 0; q < S; ++q) {
      double2 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int p = min(p0 + u * (NCT + 32), pairs - 1);
        const int mi = p / (BN / 2), n = 2 * (p - mi * (BN / 2));
        v[u] = mx::cluster_load_f64x2(&P[((int)rank + mi * (int)S) * BN + n], q);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        sum[u].x += v[u].x;
        sum[u].y += v[u].y;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + u * (NCT + 32);
      const int mi = p / (BN / 2), n = 2 * (p - mi * (BN / 2));
      const int m = (int)rank + mi * (int)S;
      if (p < pairs && m0 + m < M && n0 + n < N)  // N % 16 == 0: a pair is whole
#if OUT_F32
        *(float2 *)(C + (long long)(m0 + m) * ldc + n0 + n) = make_float2((float)sum[u].x, (float)sum[u].y);
#else
        *(u32 *)(C + (long long)(m0 + m) * ldc + n0 + n) =
            (u32)mx::double_to_bf16(sum[u].x) | ((u32)mx::double_to_bf16(sum[u].y) << 16);
#endif
    }
  }
  // No CTA leaves while another reads its partial tile. The reads are done (their values are
  // stored), so the arrival needs no release: the output stores need not land first.
  if (S > 1) mx::cluster_sync_relaxed();
}
