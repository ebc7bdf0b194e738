// Quantization of A to MXFP4 with the device functions every GEMM uses (mx::quantize8 and its float
// twin), one thread per 8 elements, a block's 4 quarters in 4 consecutive lanes:
// - mxfp4_quantize: bf16 A [M, K] (row stride lda) to packed codes [M, K/2] and e8m0 scales [M, K/32],
//   plain layout.
// - mxfp4_quantize_tokens: A (A_KIND 0 bf16, 1 fp16, 2 float32) into the streaming GEMM's operand
//   (gemm_stream.cu), and its fix-up flags zeroed.
#include "mxfp4.cuh"

#ifndef A_KIND
#define A_KIND 0
#endif

extern "C" __global__ void mxfp4_quantize(const u16 *__restrict__ A, int lda, u8 *__restrict__ codes,
                                          u8 *__restrict__ scales, int M, int K) {
  int r, k8;
  bool ok;
  const uint4 v = mx::load8(A, lda, M, K, r, k8, ok);
  u32 sbyte;
  const u32 c = mx::quantize8(v, sbyte);
  if (ok) {
    *(u32 *)(codes + (long long)r * (K >> 1) + k8 * 4) = c;
    if ((k8 & 3) == 0) scales[(long long)r * (K >> 5) + (k8 >> 2)] = (u8)sbyte;
  }
}

// One thread a quarter block of A's token rows 0..rows-1 (rows M.. quantize zeros), in row-major order.
// A [M, Ka] (row stride lda elements) is read as [M, K] with zero blocks past Ka (the weight's K
// padding). as8 byte ((b * rows + r) * 4 + q) * 8 holds quarter q of row r's block b (8 int8 values,
// twice the e2m1 values), sa[b * rows + r] the block's half-scale. Zeroes flags[0, nflags). Its first
// instruction lets the GEMM that depends on it launch (programmatic dependent launch).
extern "C" __global__ void __launch_bounds__(256)
mxfp4_quantize_tokens(const u8 *__restrict__ A, int lda, int M, int Ka, int K, u8 *__restrict__ as8,
                      float *__restrict__ sa, int rows, u32 *__restrict__ flags, int nflags) {
  mx::pdl_launch_dependents();
  constexpr int ESIZE = A_KIND == 2 ? 4 : 2;
  const int nblk = K >> 5;
  const long long it = (long long)blockIdx.x * 256 + threadIdx.x;
  if (it < nflags) flags[it] = 0u;
  const long long items = (long long)rows * nblk * 4;
  if (it - (it & 31) >= items) return;  // whole warps past the end (the shuffles need all lanes)
  const int r = (int)(it / (nblk * 4)), b = (int)((it >> 2) % nblk), q = (int)(it & 3);
  const bool ok = it < items && r < M && b * 32 < Ka;
  u32 sbyte;
  const u32 codes = mx::quantize_quarter<A_KIND>(A + ((long long)r * lda + b * 32 + q * 8) * ESIZE, ok, sbyte);
  if (it < items) {
    const long long o = (long long)b * rows + r;
    *(uint2 *)(as8 + (o * 4 + q) * 8) = make_uint2(mx::e2m1x4_to_s8x4(codes), mx::e2m1x4_to_s8x4(codes >> 16));
    if (q == 0) sa[o] = mx::half_scale(sbyte);
  }
}
