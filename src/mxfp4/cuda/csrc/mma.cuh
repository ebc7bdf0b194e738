// The int8 mma.sync m16n8k32 tile of the short-K, decode and streaming kernels (gemm_small.cu, gemm_decode.cu;
// gemm_stream.cu's form at the end):
// a block of the weight's codes as the MMA's row operand, and a block's MMAs (A, quantized, the
// column operand) with their promotion into float32 totals. Lane (g, t) = (lane / 4,
// lane % 4) holds weight rows g and g + 8 and tokens 2t, 2t + 1 of each 8-token MMA.
#pragma once
#include "mxfp4.cuh"

namespace mx {

// D = A (16x32 s8, row) * B (32x8 s8, col), int32 (C = 0: no accumulator registers to set up).
__device__ __forceinline__ void mma_s8_zero(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// x in a register of each thread: the compiler can neither fold it to a constant nor hold it in a
// uniform register (a byte-permute's first source must be a thread register; a constant there is
// otherwise copied from a uniform register before every use).
__device__ __forceinline__ u32 thread_register(u32 x) {
  u32 z = threadIdx.x;
  asm volatile("" : "+r"(z));
  return x | (z & 0x80000000u);  // z < 1024: x itself
}

// mma.sync m16n8k32 s8 with the accumulator of row g starting at c0 and of row g + 8 at c1.
__device__ __forceinline__ void mma_s8_rows(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, u32 c0, u32 c1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%11,%11};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c0), "r"(c1));
}

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

// The streaming GEMM's form (gemm_stream.cu): a block of a row group, its codes to int8 (SIGNS, the signs split: the
// positive and the negative codes' magnitudes, one byte-permute a 4 codes each, two MMAs whose difference
// is the block sum; else e2m1x4_to_s8x4, one MMA), N8 MMAs of 8 tokens (wb the lane's fragment bytes; ab
// its 8 N8 int8 values and sab its 2 N8 half-scales, each tile's adjacent as mxfp4_quantize_tokens writes
// them with tiles = N8: one load each up to two tiles), each block sum scaled into acc.
// The sums come from MMAs on a zero accumulator; one integer add puts a sum s (|s| < 2**22) into the
// mantissa of the start c0 (row g) or c1 (row g + 8), and the float difference with the start is s times
// the start's unit in the last place, exactly. FOLD: the starts hold the rows' half-scales (fold_start),
// so a product is that and an fma with A's half-scale; else they are 1.5 * 2**23 and each sum is scaled by
// both half-scales sw0, sw1 (NaN included). Within the domain both give the same bits. EVEN (M = 1):
// only the MMAs' even columns (tokens 0, 2, 4, 6) are summed. tab: the byte-permute table's low word,
// 0x03020100, held in a thread register (thread_register).
template <int N8, bool SIGNS, bool EVEN, bool FOLD>
__device__ __forceinline__ void block_sums(const u8 *wb, const u8 *ab, const float *sab, u32 c0, u32 c1, float sw0,
                                           float sw1, u32 tab, float (&acc)[N8][4]) {
  const u32 l = *(const u32 *)wb, h = *(const u32 *)(wb + 128);
  u32 ap[4], an[4];  // SIGNS: the positive and the negative codes' magnitudes; else ap the signed values
  if constexpr (SIGNS) {
    const u32 nl = l ^ 0x88888888u, nh = h ^ 0x88888888u;
    ap[0] = e2m1x4_positive(l, tab), ap[1] = e2m1x4_positive(h, tab);
    ap[2] = e2m1x4_positive(l >> 16, tab), ap[3] = e2m1x4_positive(h >> 16, tab);
    an[0] = e2m1x4_positive(nl, tab), an[1] = e2m1x4_positive(nh, tab);
    an[2] = e2m1x4_positive(nl >> 16, tab), an[3] = e2m1x4_positive(nh >> 16, tab);
  } else {
    ap[0] = e2m1x4_to_s8x4(l), ap[1] = e2m1x4_to_s8x4(h);
    ap[2] = e2m1x4_to_s8x4(l >> 16), ap[3] = e2m1x4_to_s8x4(h >> 16);
  }
  uint2 bvs[N8];
  float2 savs[N8];
  if constexpr (N8 == 1) {
    bvs[0] = *(const uint2 *)ab;
    savs[0] = *(const float2 *)sab;
  } else {
#pragma unroll
    for (int j = 0; j < N8; j += 2) {
      const uint4 x = *(const uint4 *)(ab + j * 8);
      const float4 y = *(const float4 *)(sab + j * 2);
      bvs[j] = make_uint2(x.x, x.y), bvs[j + 1] = make_uint2(x.z, x.w);
      savs[j] = make_float2(y.x, y.y), savs[j + 1] = make_float2(y.z, y.w);
    }
  }
#pragma unroll
  for (int j = 0; j < N8; ++j) {
    const uint2 bv = bvs[j];
    const float2 sav = savs[j];
    int d[4];
    float v[4];
    mma_s8_zero(d, ap, bv.x, bv.y);
    if constexpr (SIGNS) {
      int e[4];
      mma_s8_zero(e, an, bv.x, bv.y);
#pragma unroll
      for (int q = 0; q < 4; q += 1 + EVEN) {
        const u32 c = q < 2 ? c0 : c1;
        v[q] = __int_as_float(d[q] - e[q] + (int)c) - __uint_as_float(c);
      }
    } else {
#pragma unroll
      for (int q = 0; q < 4; q += 1 + EVEN) {
        const u32 c = q < 2 ? c0 : c1;
        v[q] = __int_as_float(d[q] + (int)c) - __uint_as_float(c);
      }
    }
    if (FOLD) {
      acc[j][0] = fmaf(v[0], sav.x, acc[j][0]);
      acc[j][2] = fmaf(v[2], sav.x, acc[j][2]);
      if (!EVEN) {
        acc[j][1] = fmaf(v[1], sav.y, acc[j][1]);
        acc[j][3] = fmaf(v[3], sav.y, acc[j][3]);
      }
    } else {
      acc[j][0] = fmaf(v[0], sw0 * sav.x, acc[j][0]);
      acc[j][2] = fmaf(v[2], sw1 * sav.x, acc[j][2]);
      if (!EVEN) {
        acc[j][1] = fmaf(v[1], sw0 * sav.y, acc[j][1]);
        acc[j][3] = fmaf(v[3], sw1 * sav.y, acc[j][3]);
      }
    }
  }
}

}  // namespace mx
