// The bands of the large-M kernels (part of gemm_wgmma.cu's module): which blocks of a segment fold.
//
// A segment is 8 blocks of 32 elements. A token's band is the window [lo, lo + 3] of e8m0 exponents
// holding the most of its nonzero blocks (ties: the lowest lo), its mask the blocks inside it; a
// token tile's mask, the AND of its tokens' masks, is taken by the GEMM. A weight row's band is the
// window starting at its smallest exponent or the one ending at its largest, whichever holds more of
// its blocks (ties: the lower; row_band), a weight tile's (or 32-row unit's) mask the AND of its
// rows'. A band's blocks are shifted left by their exponent minus the band's smallest (<= 3: twice
// an e2m1 value, <= 12, stays int8) and share one multiplier, 2**(smallest - 128); the others keep
// their own. The blocks in both masks add into one int32 sum, scaled once; every other block is a
// term of its own. An outlier channel's block leaves the band and the rest of its segment still
// folds.
#pragma once
#include "mxfp4.cuh"

namespace {

// Four int8 (packed) shifted left by s (0..3) each; no value leaves int8 (|v| <= 12 before).
__device__ __forceinline__ u32 shl_s8x4(u32 x, u32 s) {
  return (x << s) & (0x01010101u * ((0xFFu << s) & 0xFFu));
}

// The band of a token's segment: the window [lo, lo + 3] of exponents holding the most of its
// nonzero blocks (ties: the lowest lo). `e` is this lane's block exponent (-1: zero or NaN, any
// band); lane 4b holds block b. Outlier channels put one block 4..7 binary orders above the rest:
// the band leaves it out, and the other seven still fold.
__device__ __forceinline__ int band_window(int e) {
  int count = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const int ec = __shfl_sync(0xffffffffu, e, 4 * c, 32);
    count += ec >= 0 && ec >= e && ec <= e + 3;
  }
  int key = e >= 0 ? (count << 8) | (255 - e) : 0;
#pragma unroll
  for (int x = 4; x <= 16; x <<= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, x));
  return 255 - (key & 255);
}

// A weight row's band from its eight exponent bytes x0 (blocks 0-3), x1 (4-7), 255 for NaN or past
// K (in no band), byte-parallel (four bytes an operation): of the windows
// starting at its smallest exponent and ending at its largest, the one holding more of its blocks
// (ties: the lower). A row spanning at most 4 binary orders has one window; an outlier column puts
// a block above the rest, and the low window leaves it out. Returns the window's start, 255 for a
// row without a block in any band; `bits`: the blocks inside it.
__device__ __forceinline__ u32 row_band(u32 x0, u32 x1, u32 &bits) {
  const u32 v0 = __vcmpne4(x0, 0xFFFFFFFFu), v1 = __vcmpne4(x1, 0xFFFFFFFFu);
  u32 mn = __vminu4(x0, x1), mx_ = __vmaxu4(__vadd4(x0, 0x01010101u), __vadd4(x1, 0x01010101u));  // 255 -> 0
  mn = __vminu4(mn, __byte_perm(mn, 0, 0x1032));
  mn = __vminu4(mn, __byte_perm(mn, 0, 0x2301));
  mx_ = __vmaxu4(mx_, __byte_perm(mx_, 0, 0x1032));
  mx_ = __vmaxu4(mx_, __byte_perm(mx_, 0, 0x2301));
  u32 lo = mn & 0xFFu;
  const u32 hi = (mx_ & 0xFFu) - 1u;  // the largest valid exponent (when lo != 255)
  u32 f0 = __vcmpleu4(x0, min(lo + 3u, 255u) * 0x01010101u) & v0, f1 = __vcmpleu4(x1, min(lo + 3u, 255u) * 0x01010101u) & v1;
  if (lo != 255u && hi - lo > 3u) {
    const u32 top = (hi - 3u) * 0x01010101u;
    const u32 g0 = __vcmpgeu4(x0, top) & v0, g1 = __vcmpgeu4(x1, top) & v1;
    if (__popc(g0) + __popc(g1) > __popc(f0) + __popc(f1)) {
      f0 = g0, f1 = g1;
      u32 m = __vminu4(x0 | ~g0, x1 | ~g1);  // the high window's smallest exponent
      m = __vminu4(m, __byte_perm(m, 0, 0x1032));
      lo = __vminu4(m, __byte_perm(m, 0, 0x2301)) & 0xFFu;
    }
  }
  f0 &= 0x01010101u, f1 &= 0x01010101u;
  bits = (f0 * 0x10204080u) >> 28 | ((f1 * 0x10204080u) >> 28) << 4;  // byte b's flag to bit b
  return lo;
}

// A weight row's band as the fold takes it, from its segment's eight exponent bytes (ex: byte b block
// b's, 255 for NaN or past K): the blocks in its band (row_band) and the band's smallest exponent, or
// no band and 0 where the fold's start would not be a normal float (an exponent above 232).
__device__ __forceinline__ u32 fold_band(u64 ex, u32 &band) {
  u32 base = row_band((u32)ex, (u32)(ex >> 32), band);
  if (band == 0 || base > 232u) band = 0, base = 0;
  return base;
}

// The fold's int32 accumulator start for a band whose smallest exponent is base (<= 232): the bits of
// 1.5 * 2**23 * 2**(base - 128). mx::fold_start's value (tests/test_wgmma.py), written as the sum: the
// two forms give other code in each kernel that uses them, so each keeps its own.
__device__ __forceinline__ u32 fold_start_bits(u32 base) { return 0x4B400000u + (base - 128u) * (1u << 23); }

// The AND of T tokens' band masks (bytes at `masks`), the same in every lane: the blocks inside the
// band of every one of them.
template <int T>
__device__ __forceinline__ u32 tokens_mask(const u8 *masks, int lane) {
  u32 m = 0xFFu;
#pragma unroll
  for (int i = 0; i < T / 32; ++i) m &= masks[32 * i + lane];
  return __reduce_and_sync(0xffffffffu, m);
}

}  // namespace
