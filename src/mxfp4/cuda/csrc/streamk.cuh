// The stream-K split of the two weight-streaming GEMMs (gemm_stream.cu, gemm_band.cu): CTA i of the grid takes
// units [U i / grid, U (i + 1) / grid) of U units numbered tile-major; a tile split between CTAs is summed by
// the CTA holding its last unit (the owner). The others hand their partial on (stored in the workspace, then
// a flag released); the owner, after its whole range, waits for the flags of the CTAs before it that hold
// some of the tile (all of lower index, so all already running) and adds their partials in CTA order.
#pragma once
#include "hopper.cuh"

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

__device__ __forceinline__ void streamk_add(float &a, float b) { a += b; }
__device__ __forceinline__ void streamk_add(float2 &a, float2 b) {
  a.x += b.x;
  a.y += b.y;
}

// The owner's sum of its first tile, after streamk_wait: each output (V: one float, or float2 for two
// columns) of tokens < M and columns n0 + r < N is the partials of the CTAs first .. cta - 1 (part
// [grid][NT][NR] float32, read past L1) in CTA order, then its own (own(tok, r)), stored by store(tok, r, v).
// The threads tid, tid + nthreads, ... take the tile's NT x NR / (sizeof(V) / 4) outputs in token-major order.
template <int NT, int NR, class V, class Own, class Store>
__device__ __forceinline__ void streamk_add_partials(const float *part, int first, int cta, int M, int N, int n0,
                                                     int tid, int nthreads, Own own, Store store) {
  constexpr int E = sizeof(V) / 4;
  for (int p = tid; p < NT * NR / E; p += nthreads) {
    const int tok = p / (NR / E), r = E * (p % (NR / E));
    if (tok >= M || n0 + r >= N) continue;
    V v = __ldcg((const V *)(part + ((long long)first * NT + tok) * NR + r));
    for (int c = first + 1; c < cta; ++c)
      streamk_add(v, __ldcg((const V *)(part + ((long long)c * NT + tok) * NR + r)));
    streamk_add(v, own(tok, r));
    store(tok, r, v);
  }
}

}  // namespace mx
