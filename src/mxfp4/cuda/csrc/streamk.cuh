// The stream-K split of the two weight-streaming GEMMs (gemm_stream.cu, gemm_band.cu): CTA i of the grid takes
// units [U i / grid, U (i + 1) / grid) of U units numbered tile-major; a tile split between CTAs is summed by
// the CTA holding its last unit (the owner). The others hand their partial on (stored in the workspace, then
// a flag released); the owner, after its whole range, waits for the flags of the CTAs before it that hold
// some of the tile (all of lower index, so all already running) and adds their partials in CTA order.
#pragma once
#include "mxfp4.cuh"

namespace mx {

// The CTA whose range holds unit u.
__device__ __forceinline__ int streamk_cta_of(long long u, long long units, int grid) {
  return (int)(((u + 1) * grid + units - 1) / units) - 1;
}

// This CTA's partial of its last tile is stored (by every thread, before a barrier): one thread sets its flag.
__device__ __forceinline__ void streamk_hand_on(u32 *flags, int cta) {
  pdl_wait();  // the quantizer's zeroing of the flags comes first
  __threadfence();
  flag_release(&flags[cta], 1u);
}

// The owner's one thread: waits until the CTAs first .. cta - 1 (those with units) have handed on.
__device__ __forceinline__ void streamk_wait(const u32 *flags, int first, int cta, long long units, int grid) {
  pdl_wait();
  for (int c = first; c < cta; ++c)
    if (units * c / grid < units * (c + 1) / grid)  // a CTA with units (the host launches no empty one)
      while (flag_acquire(&flags[c]) == 0u) {
      }
}

}  // namespace mx
