// The grouped GEMMs' work items (mxfp4_gemm_grouped in gemm_decode.cu; mxfp4_wgmma_prep_grouped and
// mxfp4_gemm_cv_grouped in gemm_wgmma.cu's GROUPED build): which chunk of which expert's token rows a CTA
// takes, found on the device from the experts' offsets.
#pragma once
#include "mxfp4.cuh"

namespace mx {

// The work item `item` of a grouped call: the experts' token rows cut into chunks of TOK, numbered
// in expert order. Expert e takes rows [offsets[e-1], offsets[e]) (offsets int32, or int64 when
// off64; each clamped to [start, T], so a malformed offsets array cannot send a CTA out of bounds).
// Sets r0 and rows (rows <= TOK) and returns the expert, or -1 past the last chunk. Every thread of
// the CTA calls it; a block-wide prefix sum of the experts' chunk counts, THREADS experts a round.
template <int THREADS, int TOK>
__device__ __forceinline__ int grouped_item(const void *offsets, int off64, int E, int T, int item, int &r0,
                                            int &rows) {
  __shared__ int warp_sum[THREADS / 32], found[3];
  static_assert((THREADS / 32 + 3) * 4 <= 256, "the search's static shared memory exceeds params.GROUPED_STATIC_SMEM");
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) found[0] = -1;
  int carry = 0;  // chunks of the experts before this round
  for (int base = 0; base < E && carry <= item; base += THREADS) {
    const int e = base + tid;
    int start = 0, end = 0;
    if (e < E) {
      const long long hi = off64 ? ((const long long *)offsets)[e] : ((const int *)offsets)[e];
      const long long lo = e == 0 ? 0 : (off64 ? ((const long long *)offsets)[e - 1] : ((const int *)offsets)[e - 1]);
      start = (int)min(max(lo, 0ll), (long long)T);
      end = (int)min(max(hi, (long long)start), (long long)T);
    }
    const int chunks = (end - start + TOK - 1) / TOK;
    int incl = chunks;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    int before = carry;
    for (int w = 0; w < warp; ++w) before += warp_sum[w];
    incl += before;
    if (chunks && item >= incl - chunks && item < incl) {
      const int c = item - (incl - chunks);
      found[0] = e;
      found[1] = start + c * TOK;
      found[2] = min(TOK, end - (start + c * TOK));
    }
    for (int w = 0; w < THREADS / 32; ++w) carry += warp_sum[w];
    __syncthreads();  // warp_sum is rewritten next round; found is complete after the last
  }
  r0 = found[1];
  rows = found[2];
  return found[0];
}

}  // namespace mx
