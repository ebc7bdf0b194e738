// MXFP4 quantization of bf16 A [M, K] (row stride lda) to packed codes [M, K/2] and e8m0 scales
// [M, K/32], plain layout, with the same device function as the GEMM's in-kernel quantizer.
// One thread per 8 elements; a block's 4 quarters are in 4 consecutive lanes.
#include "mxfp4.cuh"

extern "C" __global__ void mxfp4_quantize(const u16 *__restrict__ A, int lda, u8 *__restrict__ codes,
                                          u8 *__restrict__ scales, int M, int K) {
  const long long it = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const int per_row = K >> 3;
  const bool ok = it < (long long)M * per_row;
  int r = 0, k8 = 0;
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (ok) {
    r = (int)(it / per_row);
    k8 = (int)(it - (long long)r * per_row);
    v = *(const uint4 *)(A + (long long)r * lda + k8 * 8);
  }
  u32 sbyte;
  const u32 c = mx::quantize8(v, sbyte);
  if (ok) {
    *(u32 *)(codes + (long long)r * (K >> 1) + k8 * 4) = c;
    if ((k8 & 3) == 0) scales[(long long)r * (K >> 5) + (k8 >> 2)] = (u8)sbyte;
  }
}
