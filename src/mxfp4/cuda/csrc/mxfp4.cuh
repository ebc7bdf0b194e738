// Device code shared by every kernel: MXFP4 element and scale rules, the code -> int8 conversion,
// the output's rounding (the Hopper primitives: hopper.cuh; the mma.sync tile: mma.cuh).
// Compiled by NVRTC with no system headers: only builtin types and intrinsics are used.
#pragma once

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

// The GEMMs' output element: bf16 bits, or with OUT_F32 1 (a JIT define) float32, the unrounded total
// (a row-parallel rank's partial, summed across ranks and rounded to bf16 after).
#ifndef OUT_F32
#define OUT_F32 0
#endif
#if OUT_F32
typedef float out_t;
#else
typedef u16 out_t;
#endif

// The activations' element, a JIT define of the kernels that quantize A: 0 bf16, 1 fp16 (their bits as
// a_t), 2 float32.
#ifndef A_KIND
#define A_KIND 0
#endif
#if A_KIND == 2
typedef float a_t;
#else
typedef u16 a_t;
#endif

namespace mx {

// 2**k as float32 for k in [-127, 127] (2**-127 is the subnormal 0x00400000).
__device__ __forceinline__ float pow2(int k) {
  return k >= -126 ? __uint_as_float((u32)(k + 127) << 23) : __uint_as_float(0x00400000u);
}

// Half the scale of an e8m0 byte b, 2**(b - 128), as float32; NaN for b = 255. The kernels multiply
// doubled e2m1 values (integers -12..12), so half the scale turns their products back into values.
__device__ __forceinline__ float half_scale(u32 b) {
  if (b == 255u) return __uint_as_float(0x7fc00000u);
  if (b >= 2u) return __uint_as_float((b - 1u) << 23);
  return __uint_as_float(0x00400000u >> (1u - b));  // b = 1: 2**-127, b = 0: 2**-128 (subnormals)
}

// e8m0 byte of a block from the float32 bits of its finite amax (aiter's rule): amax + 0x200000 with
// the mantissa cleared, e = floor(log2) - 2, clamped to [-127, 127]; a rounding up to 2**128 gives 127.
__device__ __forceinline__ int aiter_exponent(u32 amax_bits) {
  const int biased = (int)((amax_bits + 0x200000u) >> 23);
  if (biased == 255) return 127;
  const int e = biased - 129;
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

// e2m1 magnitude code (0..7) nearest to q >= 0, ties to the even code, saturating at 6 (code 7).
// q < 8 always holds here (q = |x| / 2**e with e from the block's amax). rint comes from adding
// 1.5 * 2**23 (exact for arguments below 2**22), whose low mantissa bits are then the integer.
__device__ __forceinline__ u32 e2m1_code(float q) {
  const float kMagic = 12582912.0f;
  const u32 r2 = __float_as_uint(fmaf(q, 2.0f, kMagic)) - 0x4B400000u;  // rint(2q): grid 0.5 below 2
  const u32 r1 = __float_as_uint(q + kMagic) - 0x4B400000u;             // rint(q): grid 1 in [2, 4)
  return q < 2.0f ? r2 : (q < 4.0f ? r1 + 2u : (q > 5.0f ? 7u : 6u));
}

// Quantizes 8 consecutive bf16 elements (a quarter of a 32-element block, packed in v). The four
// quarters of a block sit in four consecutive lanes (lane & 3 = quarter), which all call this
// together: the block's amax is reduced across them. Returns the 8 codes, element i in nibble i
// (sign in bit 3), and the block's e8m0 byte. A block holding NaN or Inf gets byte 255 and codes 0.
__device__ __forceinline__ u32 quantize8(uint4 v, u32 &scale_byte) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
  u32 amax = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    amax = max(amax, (w[i] << 16) & 0x7fffffffu);
    amax = max(amax, w[i] & 0x7fff0000u);
  }
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  if (amax >= 0x7f800000u) {
    scale_byte = 255u;
    return 0u;
  }
  const int e = aiter_exponent(amax);
  scale_byte = (u32)(e + 127);
  const float inv = pow2(-e);
  u32 codes = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const u32 bits = (i & 1) ? (w[i >> 1] & 0xffff0000u) : (w[i >> 1] << 16);
    const u32 c = e2m1_code(__uint_as_float(bits & 0x7fffffffu) * inv) | ((bits >> 28) & 8u);
    codes |= c << (4 * i);
  }
  return codes;
}

// quantize8 for 8 float32 values (fp16 and float32 activations, converted exactly): the same rule
// and the same bits as quantize8 on the values' float32 patterns (amax as bits, aiter's exponent,
// nearest e2m1 with ties to even; NaN/Inf blocks byte 255, codes 0). The four quarters of a block
// sit in four consecutive lanes, which all call it together.
__device__ __forceinline__ u32 quantize8f(const float (&x)[8], u32 &scale_byte) {
  u32 amax = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = max(amax, __float_as_uint(x[i]) & 0x7fffffffu);
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  if (amax >= 0x7f800000u) {
    scale_byte = 255u;
    return 0u;
  }
  const int e = aiter_exponent(amax);
  scale_byte = (u32)(e + 127);
  const float inv = pow2(-e);  // |x| * 2**-e is exact: a power of two, no value of the block overflows
  u32 codes = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const u32 bits = __float_as_uint(x[i]);
    codes |= (e2m1_code(__uint_as_float(bits & 0x7fffffffu) * inv) | ((bits >> 28) & 8u)) << (4 * i);
  }
  return codes;
}

// fp16 bits -> float32 (exact).
__device__ __forceinline__ float half_bits_to_float(u32 h) {
  float f;
  asm("{\n .reg .b16 hb;\n cvt.u16.u32 hb, %1;\n cvt.f32.f16 %0, hb;\n}" : "=f"(f) : "r"(h));
  return f;
}

// A quarter block of activations as loaded (KIND 0: bf16, 1: fp16, one 16-byte word; 2: float32, two), so
// that a kernel may issue its loads early and quantize later.
template <int KIND>
struct Quarter {
  uint4 v[KIND == 2 ? 2 : 1];
};

// The 8 consecutive activations at A + i (16-byte aligned), or zeros where !ok.
template <int KIND>
__device__ __forceinline__ Quarter<KIND> load_quarter(const a_t *A, long long i, bool ok) {
  constexpr int WORDS = KIND == 2 ? 2 : 1;
  Quarter<KIND> x;
#pragma unroll
  for (int w = 0; w < WORDS; ++w) x.v[w] = make_uint4(0u, 0u, 0u, 0u);
  if (ok) {
#pragma unroll
    for (int w = 0; w < WORDS; ++w) x.v[w] = ((const uint4 *)(A + i))[w];
  }
  return x;
}

// Quantizes a loaded quarter with quantize8's lane rule; bf16 takes quantize8 itself, fp16 and float32
// quantize8f on their exact float32 values.
template <int KIND>
__device__ __forceinline__ u32 quantize_loaded(const Quarter<KIND> &a, u32 &scale_byte) {
  if (KIND == 0) return quantize8(a.v[0], scale_byte);
  float x[8];
  if (KIND == 1) {
    const u32 w[4] = {a.v[0].x, a.v[0].y, a.v[0].z, a.v[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = half_bits_to_float(w[i] & 0xffffu);
      x[2 * i + 1] = half_bits_to_float(w[i] >> 16);
    }
  } else {
    const uint4 v0 = a.v[0], v1 = a.v[KIND == 2 ? 1 : 0];
    x[0] = __uint_as_float(v0.x); x[1] = __uint_as_float(v0.y); x[2] = __uint_as_float(v0.z);
    x[3] = __uint_as_float(v0.w); x[4] = __uint_as_float(v1.x); x[5] = __uint_as_float(v1.y);
    x[6] = __uint_as_float(v1.z); x[7] = __uint_as_float(v1.w);
  }
  return quantize8f(x, scale_byte);
}

// Quantizes the 8 consecutive activations at A + i (16-byte aligned) or zeros where !ok.
template <int KIND>
__device__ __forceinline__ u32 quantize_quarter(const a_t *A, long long i, bool ok, u32 &scale_byte) {
  return quantize_loaded<KIND>(load_quarter<KIND>(A, i, ok), scale_byte);
}

// Traps unless the launch gave this CTA at least `bytes` of dynamic shared memory: a variant run with
// too little would read and write past its buffers.
__device__ __forceinline__ void require_dynamic_smem(u32 bytes) {
  u32 dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < bytes) __trap();
}

// The 8 elements of thread `it` of a bf16 matrix [M, K] (row stride lda), one thread per 8
// elements in row-major order: sets its row r and group k8 (element k8 * 8) and whether it exists;
// a thread past the end gets zeros (it still takes part in quantize8's lane reduction).
__device__ __forceinline__ uint4 load8(const u16 *A, int lda, int M, int K, int &r, int &k8, bool &ok) {
  const long long it = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const int per_row = K >> 3;
  ok = it < (long long)M * per_row;
  r = 0;
  k8 = 0;
  if (!ok) return make_uint4(0u, 0u, 0u, 0u);
  r = (int)(it / per_row);
  k8 = (int)(it - (long long)r * per_row);
  return *(const uint4 *)(A + (long long)r * lda + k8 * 8);
}

// Four e2m1 codes (nibbles 0..3 of c) -> four int8 holding twice their values (byte i from nibble i).
// Two byte-permute lookups give the positive and negative values; a third picks by the sign bit.
__device__ __forceinline__ u32 e2m1x4_to_s8x4(u32 c) {
  const u32 idx = c & 0x7777u;
  const u32 pos = __byte_perm(0x03020100u, 0x0C080604u, idx);  //  0  1  2  3 |  4  6  8  12
  const u32 neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, idx);  // -0 -1 -2 -3 | -4 -6 -8 -12
  return __byte_perm(pos, neg, ((c >> 1) & 0x4444u) | 0x3210u);
}

// PTX prmt.b32 in its default mode: byte i of the result is byte (sel >> 4 i) & 7 of (b:a), or, where bit 3 of
// that selector nibble is set, that byte's sign replicated (0x00 or 0xFF). CUDA's __byte_perm ignores bit 3.
// With a table of the positive e2m1 magnitudes and 4 codes as the selector, the negative codes read 0.
// Inline PTX also keeps the compiler from narrowing a 32-bit selector mask (an extra operation a selector).
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// Twice the magnitudes of the positive e2m1 codes among four (nibbles 0..3 of c; byte i from nibble i),
// 0 for the negative ones: one byte-permute whose selector nibbles are the codes themselves (a set
// bit 3, the sign, replicates the sign of a positive table byte: 0). With c ^ 0x8888 the same gives
// the negative codes' magnitudes: the two halves of a sign-split MMA (gemm_stream.cu, gemm_band.cu).
__device__ __forceinline__ u32 e2m1x4_positive(u32 c, u32 lo = 0x03020100u) { return prmt(lo, 0x0C080604u, c); }

// Four codes (nibbles 0..3 of c) to signed int8 through the magnitude table (tl, th) (twice the e2m1
// magnitudes 0 1 2 3 | 4 6 8 12, each byte shifted left by a band's shift, or zeros): the positive codes'
// magnitudes, the negative ones' negated bytewise, (0x80 - m) ^ 0x80 (no borrow between bytes: m <= 96).
__device__ __forceinline__ u32 e2m1x4_to_s8x4_shifted(u32 c, u32 tl, u32 th) {
  return prmt(tl, th, c) | ((0x80808080u - prmt(tl, th, c ^ 0x8888u)) ^ 0x80808080u);
}

// Round a float to bf16 bits, to nearest even (NaN stays NaN, overflow rounds to Inf).
__device__ __forceinline__ u16 float_to_bf16(float x) {
  const u32 b = __float_as_uint(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (u16)0x7fc0u;
  return (u16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// Two floats rounded to bf16, packed (a in the low half).
__device__ __forceinline__ u32 bf16x2(float a, float b) {
  return (u32)float_to_bf16(a) | ((u32)float_to_bf16(b) << 16);
}

// C's outputs: a float32 total rounded once to bf16, or as it is (OUT_F32); one, or two adjacent (p 4-byte
// aligned for bf16, 8-byte for float32).
__device__ __forceinline__ void store_out(out_t *p, float v) {
#if OUT_F32
  *p = v;
#else
  *p = float_to_bf16(v);
#endif
}

__device__ __forceinline__ void store_out2(out_t *p, float2 v) {
#if OUT_F32
  *(float2 *)p = v;
#else
  *(u32 *)p = bf16x2(v.x, v.y);
#endif
}

// Byte of the e8m0 scale of weight row rr (its row within a 32-row unit) and block cb in a 256-byte
// unit (32 rows x 8 blocks) of aiter's shuffled scale layout (layouts.py states the layout).
__device__ __forceinline__ int shuffled_scale_offset(int rr, int cb) {
  return ((rr & 31) >> 4) + 2 * ((cb & 7) >> 2) + 4 * (rr & 15) + 64 * (cb & 3);
}

// The weight's half-scale folded into an int32 MMA's accumulator start: for a scale byte e <= 232 the
// bits of 1.5 * 2**23 * 2**(e - 128) (a normal float whose unit in the last place is the half-scale),
// so an int32 sum s (|s| < 2**22) added to them gives the bits of start + s * 2**(e - 128), exactly.
__device__ __forceinline__ u32 fold_start(u32 e) { return ((e + 22u) << 23) | 0x400000u; }

}  // namespace mx
