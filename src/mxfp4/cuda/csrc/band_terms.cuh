// The banded GEMM's consumer arithmetic (part of gemm_band.cu's module, included after its constants):
// a weight row's codes converted shifted into its window (the byte-permute table shifted), a segment's fold
// (8 blocks of a band into one accumulator, then one term a row and band) and its loose pass (W-loose and
// band-L blocks, each a term of its own). gemm_band.cu's header states the numbers.
#pragma once

namespace {

constexpr u32 TLO = 0x03020100u, THI = 0x0C080604u;  // twice the e2m1 magnitudes 0 0.5 1 1.5 | 2 3 4 6

__device__ __forceinline__ u32 warp_uniform(u32 x) { return __shfl_sync(0xffffffffu, x, 0); }

#if SPLIT
// 8 codes of a row (nibble i: code i, sign in bit 3) to the positive codes' magnitudes (p) and the negative
// ones' (n), twice the e2m1 values shifted left by amt (clamped: 32 gives zeros); fragment order: lo
// codes 0..3, hi codes 4..7.
__device__ __forceinline__ void convert(u32 c, u32 amt, u32 &plo, u32 &phi, u32 &nlo, u32 &nhi) {
  const u32 tl = __funnelshift_lc(0u, TLO, amt), th = __funnelshift_lc(0u, THI, amt);
  const u32 ch = c >> 16;
  plo = mx::prmt(tl, th, c);
  phi = mx::prmt(tl, th, ch);
  nlo = mx::prmt(tl, th, c ^ 0x8888u);
  nhi = mx::prmt(tl, th, ch ^ 0x8888u);
}
#else
// The same 8 codes as signed int8 (twice the e2m1 values shifted left by amt; 32: zeros).
__device__ __forceinline__ void convert_signed(u32 c, u32 amt, u32 &lo, u32 &hi) {
  const u32 tl = __funnelshift_lc(0u, TLO, amt), th = __funnelshift_lc(0u, THI, amt);
  const u32 ch = c >> 16;
  lo = mx::e2m1x4_to_s8x4_shifted(c, tl, th);
  hi = mx::e2m1x4_to_s8x4_shifted(ch, tl, th);
}
#endif

__device__ __forceinline__ u32 byte_of(u32 x, int k) { return __byte_perm(x, 0u, 0x4440u | (u32)k); }

// The accumulator start of a row's fold (lo its base byte; a row with lo above 232 folds nothing).
__device__ __forceinline__ u32 row_start(u32 lo) { return lo <= 232u ? mx::fold_start(lo) : 0x4B400000u; }

// A block or segment sum: the positive codes' minus the negative ones' (SPLIT), or the signed codes' alone.
__device__ __forceinline__ int sum(const int (&p)[ACC], const int (&n)[ACC], int j) {
  return SPLIT ? p[j] - n[j] : p[j];
}

// A loose term's factor m * s, its overflow held at 2**127: a row factor above 2**104 times a band's
// half-scale can pass float32's range for a token whose band holds nothing in the block (its sum 0: 0 * inf
// would make the output NaN). Where the block is the token's and the pair is inside the domain the product
// is at most 2**110, so it is exact; a NaN stays NaN.
__device__ __forceinline__ float loose_factor(float m, float s) {
  const float f = m * s;
  return f == __int_as_float(0x7F800000) ? 0x1p127f : f;
}

// acc += (float((p - n) + c) - c) * m * s for the thread's fragment: rows g (start c0, factor m0) and g + 8
// (c1, m1), token pairs (2t, 2t + 1) + 8 i with the tokens' half-scales s[8 i + 2t], s[8 i + 2t + 1]. The
// row factors are 1 but in the loose pass (LOOSE), for a scale byte above 232 (its half-scale, or NaN).
template <bool LOOSE>
__device__ __forceinline__ void add_terms(float (&acc)[ACC], const int (&p)[ACC], const int (&n)[ACC], u32 c0,
                                          u32 c1, float m0, float m1, const float *s) {
  const float k0 = __uint_as_float(c0), k1 = __uint_as_float(c1);
  const int t = threadIdx.x & 3;
  auto f = [](float m, float sv) { return LOOSE ? loose_factor(m, sv) : m * sv; };
#pragma unroll
  for (int i = 0; i < TOK / 8; ++i) {
    const float2 sv = *(const float2 *)(s + 8 * i + 2 * t);
    acc[4 * i] = fmaf(__int_as_float(sum(p, n, 4 * i) + (int)c0) - k0, f(m0, sv.x), acc[4 * i]);
    acc[4 * i + 1] = fmaf(__int_as_float(sum(p, n, 4 * i + 1) + (int)c0) - k0, f(m0, sv.y), acc[4 * i + 1]);
    acc[4 * i + 2] = fmaf(__int_as_float(sum(p, n, 4 * i + 2) + (int)c1) - k1, f(m1, sv.x), acc[4 * i + 2]);
    acc[4 * i + 3] = fmaf(__int_as_float(sum(p, n, 4 * i + 3) + (int)c1) - k1, f(m1, sv.y), acc[4 * i + 3]);
  }
}

// One weight row's 8 scale bytes of a segment, from its 32-row unit's 256 bytes (u: the unit's segment at
// the row's 16-row offset, 4 * (r % 16); h: r / 16 % 2): blocks 0..3 in lo, 4..7 in hi.
__device__ __forceinline__ void row_exponents(const u8 *u, u32 h, u32 &lo, u32 &hi) {
  const u32 w0 = *(const u32 *)u, w1 = *(const u32 *)(u + 64), w2 = *(const u32 *)(u + 128),
            w3 = *(const u32 *)(u + 192);
  const u32 sel = h ? 0x7351u : 0x6240u;
  const u32 t01 = __byte_perm(w0, w1, sel), t23 = __byte_perm(w2, w3, sel);
  lo = __byte_perm(t01, t23, 0x5410u);
  hi = __byte_perm(t01, t23, 0x7632u);
}

// 0xFF in each byte of x that is not zero.
__device__ __forceinline__ u32 nonzero_bytes(u32 x) {
  const u32 hb = (((x & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | x) & 0x80808080u;
  return (hb >> 7) * 0xFFu;
}

// Bits 0..3 from the high bits of x's bytes (x: 0x80 or 0 in each byte).
__device__ __forceinline__ u32 byte_bits(u32 x) { return (((x >> 7) * 0x00204081u) >> 21) & 0xFu; }

// Both rows' codes of a block as the wgmma's fragment: sign-split (pp, nn) or signed (pp).
__device__ __forceinline__ void convert_rows(u32 x0, u32 x1, u32 a0, u32 a1, u32 (&pp)[4], u32 (&nn)[4]) {
#if SPLIT
  convert(x0, a0, pp[0], pp[2], nn[0], nn[2]);
  convert(x1, a1, pp[1], pp[3], nn[1], nn[3]);
#else
  convert_signed(x0, a0, pp[0], pp[2]);
  convert_signed(x1, a1, pp[1], pp[3]);
#endif
}

// A term of the loose pass: one block's wgmma pair (the weight's registers pp, nn; the tokens' values at
// shared address a) from zero, waited for, added with the rows' starts and factors and the tokens'
// half-scales s.
__device__ __forceinline__ void loose_term(float (&acc)[ACC], const u32 (&pp)[4], const u32 (&nn)[4], u32 a, u32 l0,
                                           u32 l1, float m0, float m1, const float *s) {
  int dp[ACC], dn[ACC];
  mx::wgmma_fence();
  mx::wgmma_rs_s8<false>(dp, pp, mx::desc_k32(a));
  if (SPLIT) mx::wgmma_rs_s8<false>(dn, nn, mx::desc_k32(a));
  mx::wgmma_commit();
  mx::wgmma_wait<0>();
  mx::fence_regs(dp);
  if (SPLIT) mx::fence_regs(dn);
  add_terms<true>(acc, dp, dn, l0, l1, m0, m1, s);
}

// Row g (h 0) or g + 8 (h 1) of the fragment: NaN for every token.
__device__ __forceinline__ void nan_row(float (&acc)[ACC], int h) {
#pragma unroll
  for (int j = 0; j < ACC; ++j)
    if (((j >> 1) & 1) == h) acc[j] = __uint_as_float(0x7fc00000u);
}

// One block of a segment's fold: row g's codes at wcb (g + 8: +128), converted with the rows' shift bytes q0,
// q1 into pp, nn, then the wgmma pairs of band 0 (the tokens' values: descriptor low word lo) and band 1 (BAND1),
// added to the accumulators d (ACCUMULATE: not the segment's first block). Waits for the block DEPTH - 1
// before (whose registers the next block's conversion takes).
template <bool BAND1, bool ACCUMULATE>
__device__ __forceinline__ void fold_block(int (&d)[4][ACC], u32 (&pp)[4], u32 (&nn)[4], const u8 *wcb, u32 q0, u32 q1,
                                           u32 lo) {
  convert_rows(*(const u32 *)wcb, *(const u32 *)(wcb + 128), q0, q1, pp, nn);
  mx::wgmma_fence();
  const u64 d0 = mx::desc_k32_of(lo);
  mx::wgmma_rs_s8<ACCUMULATE>(d[0], pp, d0);
  if (SPLIT) mx::wgmma_rs_s8<ACCUMULATE>(d[1], nn, d0);
  if (BAND1) {
    const u64 d1 = mx::desc_k32_of(lo + (KS * TOK * 32 >> 4));  // band 1's values
    mx::wgmma_rs_s8<ACCUMULATE>(d[2], pp, d1);
    if (SPLIT) mx::wgmma_rs_s8<ACCUMULATE>(d[3], nn, d1);
  }
  mx::wgmma_commit();
  mx::wgmma_wait<DEPTH - 1>();
}

// A segment: what its fold, its terms and its loose pass read.
struct Seg {
  const u8 *wc;     // row g's codes of its block 0 (g + 8: +128)
  const float *as;  // band 0's half-scales of its block 0 (band j: + j * KS * TOK floats)
  uint4 r0, r1;     // the rows' scan: shift bytes (x, y: blocks 0..3, 4..7), exponent bytes (z, w)
  u32 a0;           // band 0's values of its block 0 (a shared address; band j: + j * KS * TOK * 32)
  u32 c0, c1;       // the rows' fold starts
  u32 wl, am;       // its W-loose blocks, its band masks (warp-uniform)
};

// A segment's fold: its 8 blocks of band 0 (and band 1: BAND1) into one accumulator pair each (band 0's pair,
// then band 1's), DEPTH blocks' conversions in registers at a time (a block's wgmma reads them until its
// group is waited for); then its terms: the sums in the rows' starts' mantissas, times the tokens' band
// half-scales (at the segment's first block).
template <bool BAND1>
__device__ __forceinline__ void fold(float (&acc)[ACC], const Seg &c) {
  int d[4][ACC];
  u32 fp[DEPTH][4], fn[DEPTH][4];
  const u32 d0 = mx::desc_k32_lo(c.a0);  // block b's: + b * TOK * 32 bytes in the address field (16-byte units)
  fold_block<BAND1, false>(d, fp[0], fn[0], c.wc, byte_of(c.r0.x, 0), byte_of(c.r1.x, 0), d0);
#pragma unroll
  for (int b = 1; b < 8; ++b)
    fold_block<BAND1, true>(d, fp[b % DEPTH], fn[b % DEPTH], c.wc + b * 256, byte_of(b < 4 ? c.r0.x : c.r0.y, b & 3),
                            byte_of(b < 4 ? c.r1.x : c.r1.y, b & 3), d0 + b * TOK * 2);
  mx::wgmma_wait<0>();
  mx::fence_regs(d[0]);
  if (SPLIT) mx::fence_regs(d[1]);
  add_terms<false>(acc, d[0], d[1], c.c0, c.c1, 1.0f, 1.0f, c.as);
  if (BAND1) {
    mx::fence_regs(d[2]);
    if (SPLIT) mx::fence_regs(d[3]);
    add_terms<false>(acc, d[2], d[3], c.c0, c.c1, 1.0f, 1.0f, c.as + KS * TOK);
  }
}

// A segment's loose pass: its W-loose blocks (bands 0 and 1 for the rows outside their window, shift 0; the
// other rows zero) and band L's blocks (every row: in its window shifted, else shift 0), each a term of its
// own. The rows' starts: in the window lo's; else the block's own exponent's (above 232: 1.5 * 2**23, the
// row's half-scale a factor of its own); a NaN scale makes the row NaN for every token.
__device__ __forceinline__ void loose_pass(float (&acc)[ACC], const Seg &p) {
  for (u32 rest = warp_uniform(p.wl | ((p.am >> 16) & 0xFFu)); rest; rest &= rest - 1u) {
    const int b = __ffs(rest) - 1;
    const u32 x0 = *(const u32 *)(p.wc + b * 256), x1 = *(const u32 *)(p.wc + b * 256 + 128);
    const u32 q0 = byte_of(b < 4 ? p.r0.x : p.r0.y, b & 3), q1 = byte_of(b < 4 ? p.r1.x : p.r1.y, b & 3);
    const u32 e0 = byte_of(b < 4 ? p.r0.z : p.r0.w, b & 3), e1 = byte_of(b < 4 ? p.r1.z : p.r1.w, b & 3);
    const bool in0 = q0 < 32u, in1 = q1 < 32u;
    const u32 l0 = in0 ? p.c0 : row_start(e0), l1 = in1 ? p.c1 : row_start(e1);
    const float m0 = (in0 || e0 <= 232u) ? 1.0f : mx::half_scale(e0);
    const float m1 = (in1 || e1 <= 232u) ? 1.0f : mx::half_scale(e1);
    const u32 a_b = p.a0 + b * TOK * 32;
    const float *sb = p.as + b * TOK;
    u32 pp[4], nn[4];
    if ((p.wl >> b) & 1u) {
      convert_rows(x0, x1, q0 ^ 32u, q1 ^ 32u, pp, nn);
      if ((p.am >> b) & 1u) loose_term(acc, pp, nn, a_b, l0, l1, m0, m1, sb);
      if ((p.am >> (8 + b)) & 1u) loose_term(acc, pp, nn, a_b + KS * TOK * 32, l0, l1, m0, m1, sb + KS * TOK);
      if (e0 == 255u) nan_row(acc, 0);
      if (e1 == 255u) nan_row(acc, 1);
    }
    if ((p.am >> (16 + b)) & 1u) {
      convert_rows(x0, x1, q0 & 31u, q1 & 31u, pp, nn);
      loose_term(acc, pp, nn, a_b + 2 * KS * TOK * 32, l0, l1, m0, m1, sb + 2 * KS * TOK);
    }
  }
}

}  // namespace
