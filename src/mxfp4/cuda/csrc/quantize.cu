// MXFP4 quantization of bf16 A [M, K] (row stride lda) to packed codes [M, K/2] and e8m0 scales
// [M, K/32], plain layout, with the same device function as the GEMM's in-kernel quantizer.
// One thread per 8 elements; a block's 4 quarters are in 4 consecutive lanes.
#include "mxfp4.cuh"

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
