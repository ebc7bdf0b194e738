// The int8 wgmma peak the bench reports the GEMMs against (cuda.ops.int8_wgmma_tops): a benchmark
// kernel, no part of a GEMM. Built with no defines.
#include "wgmma.cuh"

// Every CTA (one an SM) runs two warpgroups, each issuing `iters` rounds of four m64n128k32 wgmma on
// shared-memory operands filled with pseudo-random int8 (one round in flight while the next issues);
// no global traffic. ops = CTAs * 2 * iters * 4 * 2 * 64 * 128 * 32.
namespace {
constexpr u32 SMEM_BYTES = 32768 + 1024;  // the operands (A 2 x 8 KiB, B 16 KiB), up to 1 KiB to align them
}  // namespace

extern "C" __constant__ u32 mxfp4_wgmma_peak_smem_bytes = SMEM_BYTES;  // cuda.ops.PEAK_SMEM states it

extern "C" __global__ void __launch_bounds__(256, 1) mxfp4_wgmma_peak(int iters, int *__restrict__ out) {
  extern __shared__ __align__(1024) u8 smem_raw[];
  u8 *smem = smem_raw + mx::smem_pad_1024(smem_raw);
  mx::require_dynamic_smem(SMEM_BYTES);
  const int tid = threadIdx.x;
  for (int i = tid; i < 32768 / 4; i += 256) ((u32 *)smem)[i] = (u32)i * 2654435761u ^ 0x5bd1e995u;
  mx::fence_proxy_async();
  __syncthreads();
  const u32 a_base = mx::smem_addr(smem) + (tid >> 7) * 8192, b_base = mx::smem_addr(smem) + 16384;
  int d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0;
  for (int it = 0; it < iters; ++it) {
    mx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mx::wgmma_ss_s8(d, mx::desc_sw128(a_base + kk * 32), mx::desc_sw128(b_base + kk * 32));
    mx::wgmma_commit();
    mx::wgmma_wait<1>();
  }
  mx::wgmma_wait<0>();
  mx::fence_regs(d);
  int s = 0;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += d[i];
  out[blockIdx.x * 256 + tid] = s;
}
