// The consumer warpgroups of both large-M GEMMs (part of gemm_wgmma.cu's module): a segment's wgmma
// and their promotion into the float32 totals, the tiles' raster and the output (float32 from registers, or
// bf16 staged in shared memory and written in 16-byte pieces).
//
// The fold: the int32 accumulator starts at the bits of 1.5 * 2**23 * 2**(ew - 128) (ew: the row's
// band minimum), so the sum lands in the mantissa and float(bits) - start is the sum times the row's
// factor, exactly; one fma with the token's multiplier adds the term. A row's path depends on the
// other rows of its tiles: its output can differ in the last bits with them, always inside the
// bound.
#pragma once
#include "wgmma_blob.cuh"

namespace {
constexpr int GM = 16;            // token tiles per raster group (L2 reuse of A)

// CTA id's tiles in the raster: groups of GM token tiles, the weight tiles (nwt) walked within a group so
// that its CTAs share A in L2; tT the token tile, tW the weight tile (both GEMMs launch this grid).
__device__ __forceinline__ void raster_tile(int id, int ntile, int nwt, int &tT, int &tW) {
  const int per_group = GM * nwt;
  const int grp = id / per_group, first = grp * GM, gsize = min(GM, ntile - first);
  const int local = id - grp * per_group;
  tT = first + local % gsize;
  tW = local / gsize;
}
constexpr int C_PITCH = TW + 8;   // bf16 per token row of the staged output tile
}  // namespace

// The consumers' promotion of a segment, shared by both GEMMs. A thread holds R / 4 pairs of weight
// rows (8j + 2t, 8j + 2t + 1 of its warpgroup's rows) for its two tokens: d[4j], d[4j + 1] the
// first token's, d[4j + 2], d[4j + 3] the second's.
// The fold's accumulator starts: each row's start bits (wmagic), for both tokens.
template <int R>
__device__ __forceinline__ void fold_start(int (&d)[R], const u32 *wmagic, int t) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const uint2 mg = *(const uint2 *)(wmagic + 8 * j + 2 * t);
    d[4 * j] = d[4 * j + 2] = (int)mg.x;
    d[4 * j + 1] = d[4 * j + 3] = (int)mg.y;
  }
}

// The fold's term: float(d) - start is the folded sum times the row's factor, exactly; one fma with
// the token's multiplier (fa0, fa1) adds it.
template <int R>
__device__ __forceinline__ void add_fold(float (&acc)[R], const int (&d)[R], const u32 *wmagic, int t, float fa0,
                                         float fa1) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const uint2 mg = *(const uint2 *)(wmagic + 8 * j + 2 * t);
    const float k0 = __uint_as_float(mg.x), k1 = __uint_as_float(mg.y);
    acc[4 * j] = fmaf(__int_as_float(d[4 * j]) - k0, fa0, acc[4 * j]);
    acc[4 * j + 1] = fmaf(__int_as_float(d[4 * j + 1]) - k1, fa0, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(__int_as_float(d[4 * j + 2]) - k0, fa1, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(__int_as_float(d[4 * j + 3]) - k1, fa1, acc[4 * j + 3]);
  }
}

// A block outside the fold (its sum started at 1.5 * 2**23): the sum times both multipliers, the
// rows' (wmult: the block's [TW] row of them) and the tokens' (sa0, sa1).
template <int R>
__device__ __forceinline__ void add_term(float (&acc)[R], const int (&d)[R], const float *wmult, int t, float sa0,
                                         float sa1) {
  const float k = 12582912.0f;
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const float2 sw = *(const float2 *)(wmult + 8 * j + 2 * t);
    acc[4 * j] = fmaf(__int_as_float(d[4 * j]) - k, sa0 * sw.x, acc[4 * j]);
    acc[4 * j + 1] = fmaf(__int_as_float(d[4 * j + 1]) - k, sa0 * sw.y, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(__int_as_float(d[4 * j + 2]) - k, sa1 * sw.x, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(__int_as_float(d[4 * j + 3]) - k, sa1 * sw.y, acc[4 * j + 3]);
  }
}

// The zero tokens' descriptor: one 8-row atom of zeros at `atom` (1 KiB, cleared here by consumer
// threads 0..63 of the 256, then made visible to wgmma), read for all 64 rows (a stride of 0
// between the 8-row groups).
__device__ __forceinline__ u64 zero_atom(u8 *atom, int ctid) {
  if (ctid < 1024 / 16) ((uint4 *)atom)[ctid] = make_uint4(0u, 0u, 0u, 0u);
  mx::fence_proxy_async();  // the zeros reach wgmma (the async proxy)
  mx::named_barrier(1, 256);
  return mx::desc_sw128(mx::smem_addr(atom)) & ~((u64)0x3FFF << 32);
}

// One segment of nb blocks into acc. fmask (warp-uniform, 0 or at least 2 blocks): the blocks that
// fold. The fold issues all 8 wgmma, a block outside it with the zero tokens (zero_desc) as its A: a
// wgmma under a test of its own makes ptxas fence each one, and each then waits for the one before.
// Every other block is a term of its own: its own wgmma from 1.5 * 2**23, then the sum times both
// multipliers. a_base, w_base: the segment's operands; fold: the tokens' fold multipliers [TN]; blk:
// their per-block multipliers [SEG][TN]; wmult: the rows' [SEG][TW]; wmagic: the rows' fold starts.
template <int R>
__device__ __forceinline__ void add_segment(float (&acc)[R], int (&d)[R], u32 fmask, int nb, u32 a_base, u32 w_base,
                                            u64 zero_desc, const u32 *wmagic, const float *wmult, const float *fold,
                                            const float *blk, int tok0, int tok1, int t) {
  if (fmask) {
    fold_start(d, wmagic, t);
    mx::wgmma_fence();
#pragma unroll
    for (int b = 0; b < SEG; ++b)
      mx::wgmma_ss_s8(d, (fmask >> b) & 1u ? mx::desc_sw128(a_base + (b >> 2) * (TN * 128) + (b & 3) * 32) : zero_desc,
                  mx::desc_sw128(w_base + (b >> 2) * (TW * 128) + (b & 3) * 32));
    mx::wgmma_commit();
    mx::wgmma_wait<0>();
    mx::fence_regs(d);
    add_fold(acc, d, wmagic, t, fold[tok0], fold[tok1]);
  }
  for (u32 rest = ((1u << nb) - 1u) & ~fmask; rest; rest &= rest - 1) {
    const int b = __ffs(rest) - 1;
#pragma unroll
    for (int j = 0; j < R; ++j) d[j] = 0x4B400000;
    mx::wgmma_fence();
    mx::wgmma_ss_s8(d, mx::desc_sw128(a_base + (b >> 2) * (TN * 128) + (b & 3) * 32),
                mx::desc_sw128(w_base + (b >> 2) * (TW * 128) + (b & 3) * 32));
    mx::wgmma_commit();
    mx::wgmma_wait<0>();
    mx::fence_regs(d);
    add_term(acc, d, wmult + b * TW, t, blk[b * TN + tok0], blk[b * TN + tok1]);
  }
}

// The output, shared by both GEMMs: a thread's accumulator quads j in [j0, j1) (of J), two adjacent columns
// of the tile for its tokens tok0 (quad elements 0, 1) and tok1 (2, 3).
// The float32 builds: the totals from registers, two columns a store (mx::store_out2), at C's rows m0, m1 and
// columns n + 8j, n + 8j + 1.
template <int J>
__device__ __forceinline__ void store_totals(out_t *C, int ldc, int M, int N, int m0, int m1, int n, const float *acc,
                                             int j0, int j1) {
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (j >= j0 && j < j1 && n + 8 * j < N) {  // N % 16 == 0: a pair is whole
      if (m0 < M) mx::store_out2(C + (long long)m0 * ldc + n + 8 * j, make_float2(acc[4 * j], acc[4 * j + 1]));
      if (m1 < M) mx::store_out2(C + (long long)m1 * ldc + n + 8 * j, make_float2(acc[4 * j + 2], acc[4 * j + 3]));
    }
  }
}

// bf16: the totals rounded once and staged in shared memory as [token][weight row] (ct, C_PITCH a row; the
// thread's columns row_off + 8j + 2t) ...
template <int J>
__device__ __forceinline__ void stage_totals(u16 *ct, int tok0, int tok1, int row_off, int t, const float *acc, int j0,
                                             int j1) {
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (j >= j0 && j < j1) {
      const int c = row_off + 8 * j + 2 * t;
      *(u32 *)(ct + tok0 * C_PITCH + c) = mx::bf16x2(acc[4 * j], acc[4 * j + 1]);
      *(u32 *)(ct + tok1 * C_PITCH + c) = mx::bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
}

// ... then written by the 256 consumer threads (ctid) in 16-byte pieces: the tile's TN tokens from C's row t0,
// TW rows from column n0, the 8-column chunks ch with keep(ch).
template <class Keep>
__device__ __forceinline__ void write_staged(out_t *C, int ldc, int M, int N, int t0, int n0, const u16 *ct, int ctid,
                                             Keep keep) {
  for (int p = ctid; p < TN * (TW / 8); p += 256) {
    const int tok = p / (TW / 8), ch = p % (TW / 8);
    const int m = t0 + tok, n = n0 + ch * 8;
    if (keep(ch) && m < M && n < N)
      *(uint4 *)(C + (long long)m * ldc + n) = *(const uint4 *)(ct + tok * C_PITCH + ch * 8);
  }
}
