// The int8 mma.sync m16n8k32 tile of the short-K and decode kernels (gemm_small.cu, gemm_decode.cu):
// a block of the weight's codes as the MMA's row operand, and a block's MMAs (A, quantized, the
// column operand) with their promotion into float32 totals. Lane (g, t) = (lane / 4,
// lane % 4) holds weight rows g and g + 8 and tokens 2t, 2t + 1 of each 8-token MMA.
#pragma once
#include "mxfp4.cuh"

namespace mx {

// Lane (g, t)'s row operand of one block from its two words of codes as aiter's (16, 16) shuffle
// stores them (lo: row g, hi: row g + 8; a word's low four codes k 4t.., its high four k 16 + 4t..):
// int8 twice the e2m1 values, three byte-permutes for 4 codes.
__device__ __forceinline__ void weight_fragment(u32 (&af)[4], u32 lo, u32 hi) {
  af[0] = e2m1x4_to_s8x4(lo);
  af[1] = e2m1x4_to_s8x4(hi);
  af[2] = e2m1x4_to_s8x4(lo >> 16);
  af[3] = e2m1x4_to_s8x4(hi >> 16);
}

// Block b's N8 MMAs (8 tokens each), each block sum scaled into acc. A in shared memory as
// [block][8 N8 tokens][32] int8 and [block][8 N8 tokens] half-scales, a_t / sa_t at lane (g, t)'s
// bytes of token g and half-scales of tokens 2t, 2t + 1. c0 / c1: the accumulator starts of rows g
// and g + 8. FOLD: the starts hold the rows' half-scales (fold_start), so d - start is the block
// sum times it, exactly, and one fma with A's half-scale a product; else the starts are 1.5 * 2**23,
// d - start the sum, scaled by both half-scales sw0 / sw1 (NaN included). Within the domain both
// give the same bits.
template <int N8, bool FOLD>
__device__ __forceinline__ void block_mmas(float (&acc)[N8][4], const u32 (&af)[4], const u8 *a_t, const float *sa_t,
                                           int b, u32 c0, u32 c1, float sw0, float sw1) {
#pragma unroll
  for (int j = 0; j < N8; ++j) {
    const uint2 bv = *(const uint2 *)(a_t + (b * (8 * N8) + j * 8) * 32);
    const float2 sav = *(const float2 *)(sa_t + b * (8 * N8) + j * 8);
    int d[4];
    mma_s8_rows(d, af, bv.x, bv.y, c0, c1);
    if (FOLD) {
      acc[j][0] = fmaf(__int_as_float(d[0]) - __uint_as_float(c0), sav.x, acc[j][0]);
      acc[j][1] = fmaf(__int_as_float(d[1]) - __uint_as_float(c0), sav.y, acc[j][1]);
      acc[j][2] = fmaf(__int_as_float(d[2]) - __uint_as_float(c1), sav.x, acc[j][2]);
      acc[j][3] = fmaf(__int_as_float(d[3]) - __uint_as_float(c1), sav.y, acc[j][3]);
    } else {
      const float k = 12582912.0f;  // 1.5 * 2**23: d's bits are k + sum
      acc[j][0] = fmaf(__int_as_float(d[0]) - k, sw0 * sav.x, acc[j][0]);
      acc[j][1] = fmaf(__int_as_float(d[1]) - k, sw0 * sav.y, acc[j][1]);
      acc[j][2] = fmaf(__int_as_float(d[2]) - k, sw1 * sav.x, acc[j][2]);
      acc[j][3] = fmaf(__int_as_float(d[3]) - k, sw1 * sav.y, acc[j][3]);
    }
  }
}

}  // namespace mx
