// The grouped GEMMs' work: which chunk of which expert's token rows a CTA takes, found on the device from
// the experts' offsets. grouped_item (mxfp4_wgmma_prep_grouped and mxfp4_gemm_cv_grouped in gemm_wgmma.cu's
// GROUPED build: a CTA a chunk) and grouped_chunks (mxfp4_gemm_stream_grouped in gemm_stream.cu's GROUPED
// build: every chunk in a CTA's shared memory, for its stream-K range of their tiles).
#pragma once
#include "mxfp4.cuh"

namespace mx {

// offsets[e], the cumulative end of expert e's rows (offsets int32, or int64 when off64).
__device__ __forceinline__ long long grouped_end(const void *offsets, int off64, int e) {
  return off64 ? ((const long long *)offsets)[e] : ((const int *)offsets)[e];
}

// An expert's token rows, as every grouped GEMM reads the offsets: [offsets[e-1], offsets[e]) (each
// clamped to [start, T], so a malformed array cannot send a CTA out of bounds).
__device__ __forceinline__ void grouped_rows(const void *offsets, int off64, int e, int T, int &start, int &end) {
  const long long hi = grouped_end(offsets, off64, e);
  const long long lo = e == 0 ? 0 : grouped_end(offsets, off64, e - 1);
  start = (int)min(max(lo, 0ll), (long long)T);
  end = (int)min(max(hi, (long long)start), (long long)T);
}

// One round of a block-wide prefix sum (every thread of the CTA, THREADS of them, one value v each): returns
// carry plus the values of the threads before this one, and adds the round's total to carry. warp_sum:
// THREADS / 32 ints of shared memory; two barriers, so it is free again on return.
template <int THREADS>
__device__ __forceinline__ int block_prefix(int v, int *warp_sum, int &carry) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += u;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  int before = carry;
  for (int w = 0; w < warp; ++w) before += warp_sum[w];
  for (int w = 0; w < THREADS / 32; ++w) carry += warp_sum[w];
  __syncthreads();
  return before + incl - v;
}

// The work item `item` of a grouped call: the experts' token rows (grouped_rows) cut into chunks of
// TOK, numbered in expert order. Sets r0 and rows (rows <= TOK) and returns the expert, or -1 past the
// last chunk. Every thread of the CTA calls it; a block-wide prefix sum of the experts' chunk counts,
// THREADS experts a round, up to the round that holds the item.
template <int THREADS, int TOK>
__device__ __forceinline__ int grouped_item(const void *offsets, int off64, int E, int T, int item, int &r0,
                                            int &rows) {
  __shared__ int warp_sum[THREADS / 32], found[3];
  static_assert((THREADS / 32 + 3) * 4 <= 256, "the search's static shared memory exceeds params.GROUPED_STATIC_SMEM");
  if (threadIdx.x == 0) found[0] = -1;
  int carry = 0;  // chunks of the experts before this round
  for (int base = 0; base < E && carry <= item; base += THREADS) {
    const int e = base + threadIdx.x;
    int start = 0, end = 0;
    if (e < E) grouped_rows(offsets, off64, e, T, start, end);
    const int chunks = (end - start + TOK - 1) / TOK;
    const int first = block_prefix<THREADS>(chunks, warp_sum, carry);
    if (chunks && item >= first && item < first + chunks) {
      const int c = item - first;
      found[0] = e;
      found[1] = start + c * TOK;
      found[2] = min(TOK, end - (start + c * TOK));
    }
  }
  __syncthreads();  // found is complete
  r0 = found[1];
  rows = found[2];
  return found[0];
}

// The chunks of a grouped call (each non-empty expert's rows cut into chunks of TOK, numbered in expert
// order), as grouped_chunks leaves them in shared memory: cps[e] the chunks of the experts before e
// (cps[E] = count), start[e] and rows[e] expert e's first row and row count.
struct GroupedChunks {
  const int *cps, *start, *rows;
  int E, count;
  // Chunk c (< count): sets its expert e, first row r0 and rows (<= TOK), and returns its operand's slot,
  // ceil(start[e] / TOK) + e + j for the expert's chunk j (mxfp4_quantize_grouped writes it there: slots of
  // different chunks never meet, and every slot is below ceil(T / TOK) + E).
  template <int TOK>
  __device__ __forceinline__ int find(int c, int &e, int &r0, int &n) const {
    int lo = 0, hi = E - 1;  // the last expert whose chunks begin at or before c (it has chunks: cps[e + 1] > c)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (cps[mid] <= c) lo = mid;
      else hi = mid - 1;
    }
    e = lo;
    const int j = c - cps[e], s = start[e];
    r0 = s + j * TOK;
    n = min(TOK, rows[e] - j * TOK);
    return (s + TOK - 1) / TOK + e + j;
  }
};

// Shared memory grouped_chunks takes for E experts: cps [E + 1], start [E], rows [E] (int).
__host__ __device__ __forceinline__ unsigned grouped_chunks_bytes(int E) { return 4u * (3u * (unsigned)E + 1u); }

// Every thread of the CTA: the chunks of TOK rows of the E experts' rows into `table` (shared memory,
// grouped_chunks_bytes(E)), a block-wide prefix sum of the experts' chunk counts, THREADS experts a round.
template <int THREADS, int TOK>
__device__ __forceinline__ GroupedChunks grouped_chunks(const void *offsets, int off64, int E, int T, int *table) {
  __shared__ int warp_sum[THREADS / 32];
  static_assert(THREADS / 32 * 4 <= 256, "the scan's static shared memory exceeds params.GROUPED_STATIC_SMEM");
  int *cps = table, *start = table + E + 1, *rows = start + E;
  int carry = 0;  // chunks of the experts before this round
  for (int base = 0; base < E; base += THREADS) {
    const int e = base + threadIdx.x;
    int s = 0, end = 0;
    if (e < E) grouped_rows(offsets, off64, e, T, s, end);
    const int first = block_prefix<THREADS>((end - s + TOK - 1) / TOK, warp_sum, carry);
    if (e < E) {
      cps[e] = first;
      start[e] = s;
      rows[e] = end - s;
    }
  }
  if (threadIdx.x == 0) cps[E] = carry;
  __syncthreads();
  return {cps, start, rows, E, carry};
}

}  // namespace mx
