// C[M, N] (bf16) = dequant(quant(A)) @ dequant(W)^T for bf16 A [M, K] and an MXFP4 weight W [N, K] in
// aiter's (16, 16) shuffled layout with aiter's shuffled e8m0 scales. Two launches:
//
// mxfp4_quantize_a: A quantized once (aiter's rule) into a per-call workspace: int8 twice the e2m1
//   value, block-major [K/32][M][32], and the block's half-scale as float32 [K/32][MP] (MP = M
//   rounded up to 4). It lets its dependent start at once (programmatic dependent launch).
// mxfp4_gemm_a4w4: grid (ceil(N / BN), ceil(M / BM), S) in clusters of (1, 1, S); the S CTAs of a
//   cluster split K and add their partial tiles through distributed shared memory, in rank order
//   (deterministic). One producer warp streams the weight with bulk copies (copy engine) into a
//   ring of STAGES stages of SB blocks, starting before the quantization has finished, then the
//   quantized A and the weight's scale bytes in chunks of KC blocks (two buffers). WARPS_N x
//   WARPS_M consumer warps convert the weight's codes to int8 (twice the value) per 32-element
//   block, multiply on the int8 tensor cores (m16n8k32: exact int32 block sums; W is the row
//   operand, A the column operand), scale each block sum by the two half-scales in float32 (exact
//   products), add up to 8 blocks in float32, then into float64.
//
// Exactness: every block sum and every scaling is exact; each float32 run of <= 8 terms rounds at
// most 7 times (error <= 7 * 2**-24 of the sum of magnitudes), float64 does the rest, and the
// result is rounded once to bf16. Outside float32's range (a block-scale product 2**(ea + ew) below
// 2**-149 or above 2**127) a block's contribution flushes to zero or overflows.
#include "mxfp4.cuh"

__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// One thread per 8 elements of A; a block's 4 quarters in 4 consecutive lanes.
extern "C" __global__ void mxfp4_quantize_a(const u16 *__restrict__ A, int lda, u8 *__restrict__ aq,
                                            float *__restrict__ ash, int M, int K) {
  pdl_launch_dependents();
  int r, k8;
  bool ok;
  const uint4 v = mx::load8(A, lda, M, K, r, k8, ok);
  u32 sbyte;
  const u32 codes = mx::quantize8(v, sbyte);
  if (ok) {
    const int b = k8 >> 2, q = k8 & 3;
    *(uint2 *)(aq + ((long long)b * M + r) * 32 + q * 8) =
        make_uint2(mx::e2m1x4_to_s8x4(codes), mx::e2m1x4_to_s8x4(codes >> 16));
    if (q == 0) ash[(long long)b * ((M + 3) & ~3) + r] = mx::half_scale(sbyte);
  }
}

#ifndef BN
#error "BN, BM, WARPS_N, WARPS_M, KC, SB and STAGES are set by the JIT"
#endif

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
#define A_SA (KC * BM * 32)                      // in an A buffer: int8 values, then half-scales,
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

extern "C" __global__ void __launch_bounds__(NCT + 32, 1)
mxfp4_gemm_a4w4(const u8 *__restrict__ aq, const float *__restrict__ ash, const u8 *__restrict__ W,
                const u8 *__restrict__ Wsc, int ldsc, u16 *__restrict__ C, int ldc, int M, int N, int K) {
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
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int MP = (M + 3) & ~3;
  const u32 S = mx::cluster_size(), rank = mx::cluster_rank();
  const int nblk = K >> 5;
  const int kb_begin = (int)((long long)nblk * rank / S);
  const int kb_end = (int)((long long)nblk * (rank + 1) / S);
  const int nchunks = (kb_end - kb_begin + KC - 1) / KC;
  const int rows_valid = min(BM, M - m0);
  const int rows4 = (rows_valid + 3) & ~3;
  const int grps_valid = min(NGRP, (N - n0) >> 4);

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&full[s], 1);
      mx::mbar_init(&empty[s], NCW);
    }
    for (int s = 0; s < 2; ++s) {
      mx::mbar_init(&a_full[s], 1);
      mx::mbar_init(&a_empty[s], 1);
    }
    mx::fence_barrier_init();
  }
  __syncthreads();

  double acc64[TI][TJ][4] = {};

  if (warp == NCW) {
    // ---- producer ----
    int stage = 0;
    u32 phase = 0;
    auto issue_w = [&](int blk0, int nb) {
      mx::mbar_wait(&empty[stage], phase ^ 1);  // every issuing lane sees the slot released
      if (lane == 0) mx::mbar_arrive_expect_tx(&full[stage], (u32)(grps_valid * nb * 256));
      __syncwarp();
      for (int g = lane; g < grps_valid; g += 32)
        mx::bulk_copy(ring + stage * W_STAGE + g * (SB * 256), W + (long long)(n0 / 16 + g) * 8 * K + blk0 * 256,
                      (u32)nb * 256u, &full[stage]);
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    };
    // The weight does not depend on the quantization: its first stages go out before the wait.
    const int kc0 = min(KC, kb_end - kb_begin);
    const int pre = min(STAGES, (kc0 + SB - 1) / SB);
    for (int p = 0; p < pre; ++p) issue_w(kb_begin + p * SB, min(SB, kc0 - p * SB));
    pdl_wait();
    for (int c = 0; c < nchunks; ++c) {
      const int cb0 = kb_begin + c * KC;
      const int kc = min(KC, kb_end - cb0);
      const int u0 = cb0 >> 3, u1 = (cb0 + kc - 1) >> 3;
      const u32 sbytes = (u32)(u1 - u0 + 1) * 256u;
      u8 *ab = smem + OFF_A + (c & 1) * A_BUF;
      mx::mbar_wait(&a_empty[c & 1], ((c >> 1) & 1) ^ 1);
      if (lane == 0)
        mx::mbar_arrive_expect_tx(&a_full[c & 1], (u32)(kc * (rows_valid * 32 + rows4 * 4)) + NSG * sbytes);
      __syncwarp();
      for (int b = lane; b < kc; b += 32) {
        mx::bulk_copy(ab + b * (BM * 32), aq + ((long long)(cb0 + b) * M + m0) * 32, (u32)rows_valid * 32u,
                      &a_full[c & 1]);
        mx::bulk_copy(ab + A_SA + b * (BM * 4), ash + (long long)(cb0 + b) * MP + m0, (u32)rows4 * 4u,
                      &a_full[c & 1]);
      }
      for (int g = lane; g < NSG; g += 32)
        mx::bulk_copy(ab + A_WSB + g * (SUNITS * 256), Wsc + (long long)(n0 / 32 + g) * 32 * ldsc + u0 * 256,
                      sbytes, &a_full[c & 1]);
      for (int b = (c == 0 ? pre * SB : 0); b < kc; b += SB) issue_w(cb0 + b, min(SB, kc - b));
    }
  } else {
    // ---- consumers ----
    const int wn = warp % WARPS_N, wm = warp / WARPS_N;
    const int g = lane >> 2, t = lane & 3;
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
      const u8 *as8 = smem + OFF_A + (c & 1) * A_BUF;
      const float *sa = (const float *)(as8 + A_SA);
      const u8 *wsb = as8 + A_WSB;
      mx::mbar_wait(&a_full[c & 1], (c >> 1) & 1);
      // The weight's half-scales of the chunk, from aiter's shuffled scale layout.
      for (int it = tid; it < BN * kc; it += NCT) {
        const int b = it / BN, n = it - b * BN;
        const int cb = cb0 + b, grp = n >> 5, rr = n & 31;
        const int off = grp * (SUNITS * 256) + ((cb >> 3) - u0) * 256 + (rr >> 4) + 2 * ((cb & 7) >> 2) +
                        4 * (rr & 15) + 64 * (cb & 3);
        sw[b * BN + n] = mx::half_scale(wsb[off]);
      }
      mx::named_barrier(1, NCT);

      for (int b = 0; b < kc; ++b) {
        const int bs = b % SB;
        if (bs == 0) mx::mbar_wait(&full[stage], phase);
        const u8 *ws = ring + stage * W_STAGE + bs * 256 + g * 16 + t * 4;
        u32 af[TI][4];
        float swv[TI][2];
#pragma unroll
        for (int i = 0; i < TI; ++i) {
          const u8 *p = ws + (wn * TI + i) * (SB * 256);
          const u32 lo = *(const u32 *)p, hi = *(const u32 *)(p + 128);
          af[i][0] = mx::e2m1x4_to_s8x4(lo);
          af[i][1] = mx::e2m1x4_to_s8x4(hi);
          af[i][2] = mx::e2m1x4_to_s8x4(lo >> 16);
          af[i][3] = mx::e2m1x4_to_s8x4(hi >> 16);
          const int row = wn * WN + i * 16 + g;
          swv[i][0] = sw[b * BN + row];
          swv[i][1] = sw[b * BN + row + 8];
        }
#pragma unroll
        for (int j = 0; j < TJ; ++j) {
          const int col = wm * WM + j * 8;
          const uint2 bv = *(const uint2 *)(as8 + (b * BM + col + g) * 32 + t * 8);
          const float2 sav = *(const float2 *)(sa + b * BM + col + 2 * t);
#pragma unroll
          for (int i = 0; i < TI; ++i) {
            int d[4];
            mx::mma_s8(d, af[i], bv.x, bv.y, 0x4B400000);
            const float k = 12582912.0f;  // the accumulator starts at 1.5 * 2**23: d's float bits are k + sum
            acc[i][j][0] = fmaf(__int_as_float(d[0]) - k, swv[i][0] * sav.x, acc[i][j][0]);
            acc[i][j][1] = fmaf(__int_as_float(d[1]) - k, swv[i][0] * sav.y, acc[i][j][1]);
            acc[i][j][2] = fmaf(__int_as_float(d[2]) - k, swv[i][1] * sav.x, acc[i][j][2]);
            acc[i][j][3] = fmaf(__int_as_float(d[3]) - k, swv[i][1] * sav.y, acc[i][j][3]);
          }
        }
        if (bs == SB - 1 || b == kc - 1) {
          __syncwarp();
          if (lane == 0) mx::mbar_arrive(&empty[stage]);
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
        if (++run == FLUSH) {
          run = 0;
          flush();
        }
      }
      mx::named_barrier(1, NCT);  // the buffer and sw are free for the next chunks
      if (tid == 0) mx::mbar_arrive(&a_empty[c & 1]);
    }
    flush();
  }

  // ---- partial tiles, added across the cluster in rank order ----
  __syncthreads();  // the partial tile aliases the ring and the A buffers
  double *P = (double *)smem;
  if (warp < NCW) {
    const int wn = warp % WARPS_N, wm = warp / WARPS_N;
    const int g = lane >> 2, t = lane & 3;
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
  mx::cluster_sync();
  const int my_rows = (BM - (int)rank + (int)S - 1) / (int)S;
  for (int idx = tid; idx < my_rows * BN; idx += NCT + 32) {
    const int mi = idx / BN, n = idx - mi * BN;
    const int m = (int)rank + mi * (int)S;
    if (m0 + m < M && n0 + n < N) {
      double s = 0.0;
      for (u32 q = 0; q < S; ++q) s += mx::cluster_load_f64(&P[m * BN + n], q);
      C[(long long)(m0 + m) * ldc + n0 + n] = mx::double_to_bf16(s);
    }
  }
  mx::cluster_sync();  // no CTA leaves while another reads its partial tile
}
