// Quantization of A to MXFP4 with the device functions every GEMM uses (mx::quantize8 and its float
// twin), one thread per 8 elements, a block's 4 quarters in 4 consecutive lanes:
// - mxfp4_quantize: bf16 A [M, K] (row stride lda) to packed codes [M, K/2] and e8m0 scales [M, K/32],
//   plain layout.
// - mxfp4_quantize_tokens: A (A_KIND 0 bf16, 1 fp16, 2 float32) into the streaming GEMM's operand
//   (gemm_stream.cu), and its fix-up flags zeroed.
// - mxfp4_quantize_grouped: a mixture of experts' A (the same dtypes), sorted by expert, into the grouped
//   streaming GEMM's operand (gemm_stream.cu's GROUPED build), and its fix-up flags zeroed.
// - mxfp4_quantize_bands: A (the same dtypes) into the banded GEMM's operand (gemm_band.cu): its bands,
//   their half-scales and masks; and the GEMM's fix-up flags zeroed.
#include "grouped.cuh"
#include "hopper.cuh"

extern "C" __global__ void mxfp4_quantize(const u16 *__restrict__ A, int lda, u8 *__restrict__ codes,
                                          u8 *__restrict__ scales, int M, int K) {
  int r, k8;
  bool ok;
  const uint4 v = mx::load8(A, lda, M, K, r, k8, ok);
  u32 sbyte;
  const u32 c = mx::quantize8(v, sbyte);
  if (ok) {
    *(u32 *)(codes + (long long)r * (K >> 1) + k8 * 4) = c;
    if ((k8 & 3) == 0) scales[(long long)r * (K >> 5) + (k8 >> 2)] = (u8)sbyte;
  }
}

// One thread a quarter block of A's token rows 0..rows-1 (rows M.. quantize zeros), in row-major order.
// A [M, Ka] (row stride lda elements) is read as [M, K] with zero blocks past Ka (the weight's K
// padding). A block b's rows are written in groups of 8 * tiles (rows a multiple of it if tiles > 1),
// row r = r0 + g + 8 j of its group (g < 8, j < tiles) as an MMA's column operand reaches lane (g, t)
// of tiles token tiles: quarter q of its int8 values (8, twice the e2m1 values) at as8 byte
// (b * rows + r0) * 32 + (g * 4 + q) * 8 tiles + 8 j, its half-scale at
// sa[b * rows + r0 + ((g >> 1) * tiles + j) * 2 + (g & 1)], so lane (g, t) reads its tiles' values and
// half-scales in one run each. tiles 1: plain row-major ([K/32][rows][32] and [K/32][rows]). Zeroes
// flags[0, nflags). Its first instruction lets the GEMM that depends on it launch (programmatic
// dependent launch).
extern "C" __global__ void __launch_bounds__(256)
mxfp4_quantize_tokens(const a_t *__restrict__ A, int lda, int M, int Ka, int K, u8 *__restrict__ as8,
                      float *__restrict__ sa, int rows, int tiles, u32 *__restrict__ flags, int nflags) {
  mx::pdl_launch_dependents();
  const int nblk = K >> 5;
  const long long it = (long long)blockIdx.x * 256 + threadIdx.x;
  if (it < nflags) flags[it] = 0u;
  const long long items = (long long)rows * nblk * 4;
  if (it - (it & 31) >= items) return;  // whole warps past the end (the shuffles need all lanes)
  const int r = (int)(it / (nblk * 4)), b = (int)((it >> 2) % nblk), q = (int)(it & 3);
  const bool ok = it < items && r < M && b * 32 < Ka;
  u32 sbyte;
  const u32 codes = mx::quantize_quarter<A_KIND>(A, (long long)r * lda + b * 32 + q * 8, ok, sbyte);
  if (it < items) {
    const int span = 8 * tiles, rr = r % span, g = rr & 7, j = rr >> 3;
    const long long o = (long long)b * rows + (r - rr);
    *(uint2 *)(as8 + o * 32 + ((g * 4 + q) * tiles + j) * 8) =
        make_uint2(mx::e2m1x4_to_s8x4(codes), mx::e2m1x4_to_s8x4(codes >> 16));
    if (q == 0) sa[o + ((g >> 1) * tiles + j) * 2 + (g & 1)] = mx::half_scale(sbyte);
  }
}

// The grouped streaming GEMM's operand (gemm_stream.cu's GROUPED build): A [T, Ka] (row stride lda elements,
// read as [T, K] with zero blocks past Ka), sorted by expert, expert e's rows [offsets[e-1], offsets[e])
// (int32, or int64 when off64; clamped as mx::grouped_rows clamps them), each expert's rows cut into chunks
// of TOK = 8 * tiles. Chunk j of expert e is one TOK-row operand in mxfp4_quantize_tokens' layout (tiles
// token tiles) in slot ceil(start_e / TOK) + e + j: block b's values at as8 + (slot * K/32 + b) * TOK * 32,
// its half-scales at sa + (slot * K/32 + b) * TOK; a chunk's rows past its expert's last are zeros (written
// by the thread of that last row). Slots of different chunks never meet, and all lie below
// ceil(T / TOK) + E. One thread a quarter block of A's rows, in row-major order; each CTA reads the
// experts' clamped ends into shared memory (E ints, dynamic) and finds a row's expert by binary search.
// Zeroes flags[0, nflags). Its first instruction lets the GEMM that depends on it launch (programmatic
// dependent launch).
extern "C" __global__ void __launch_bounds__(256)
mxfp4_quantize_grouped(const a_t *__restrict__ A, int lda, int T, int Ka, int K, const void *__restrict__ offsets,
                       int off64, int E, u8 *__restrict__ as8, float *__restrict__ sa, int tiles,
                       u32 *__restrict__ flags, int nflags) {
  mx::pdl_launch_dependents();
  extern __shared__ int ends[];  // [E]: offsets[e] clamped to [0, T]
  mx::require_dynamic_smem(4u * (u32)E);
  for (int e = threadIdx.x; e < E; e += 256)
    ends[e] = (int)min(max(mx::grouped_end(offsets, off64, e), 0ll), (long long)T);
  __syncthreads();
  const int nblk = K >> 5, tok = 8 * tiles;
  const long long it = (long long)blockIdx.x * 256 + threadIdx.x;
  if (it < nflags) flags[it] = 0u;
  const long long items = (long long)T * nblk * 4;
  if (it - (it & 31) >= items) return;  // whole warps past the end (the shuffles need all lanes)
  const int t = (int)(it / (nblk * 4)), b = (int)((it >> 2) % nblk), q = (int)(it & 3);
  int e = E, s = 0, end = 0;
  if (it < items) {
    int lo = 0, hi = E;  // the first expert whose end lies past row t
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (ends[mid] > t) hi = mid;
      else lo = mid + 1;
    }
    e = lo;
    if (e < E) {
      s = e ? ends[e - 1] : 0;
      end = max(ends[e], s);
    }
  }
  const bool mine = e < E && t >= s && t < end;
  u32 sbyte;
  const u32 codes = mx::quantize_quarter<A_KIND>(A, (long long)t * lda + b * 32 + q * 8, mine && b * 32 < Ka, sbyte);
  if (!mine) return;
  const int j = (t - s) / tok, r = t - s - j * tok;
  const long long o = ((long long)((s + tok - 1) / tok + e + j) * nblk + b) * tok;
  auto put = [&](int rr, uint2 v, float h) {  // row rr of the slot, as mxfp4_quantize_tokens lays out a row
    const int g = rr & 7, jj = rr >> 3;
    *(uint2 *)(as8 + o * 32 + ((g * 4 + q) * tiles + jj) * 8) = v;
    if (q == 0) sa[o + ((g >> 1) * tiles + jj) * 2 + (g & 1)] = h;
  };
  put(r, make_uint2(mx::e2m1x4_to_s8x4(codes), mx::e2m1x4_to_s8x4(codes >> 16)), mx::half_scale(sbyte));
  if (t == end - 1)
    for (int rr = r + 1; rr < tok; ++rr) put(rr, make_uint2(0u, 0u), 0.0f);
}

// The banded GEMM's operand (gemm_band.cu): A [M, Ka] (row stride lda elements) read as [M, K] with zero
// blocks past Ka, quantized, each token's 256-element segment cut into three bands. A CTA a segment, a warp a
// token row (rows M..tok-1 zeros), a lane a quarter block (block lane / 4 of the segment). Band 0: the
// blocks whose scale byte lies in the window of 4 ending at the segment's largest, band 1 the window of 4
// ending at the largest of the rest, band L the rest and the NaN blocks; all-zero blocks none. In bands 0
// and 1 twice the e2m1 values are shifted left by the byte minus the band's base (the window's lowest),
// in band L not. Written, for band j (0, 1, L = 2) and block b (of nblk8 = K/32 rounded up to 8):
// qa + ((j * nblk8 + b) * tok) * 32: the tok x 32 int8 values in the layout of mx::desc_k32, value k of a
// block at K slot k % 8 < 4 ? 4 (k / 8) + k % 4 : 16 + 4 (k / 8) + k % 4 (the weight's fragment order), zero
// where the token's block is not in band j; qs[(j * nblk8 + b) * tok + r]: the half-scale of the band's
// base (bands 0 and 1, at every block of the segment where the token has the band) or of the block's own
// byte (band L, NaN for 255), else 0; meta[segment]: the blocks each band holds for any token (bits 0..7
// band 0, 8..15 band 1, 16..23 band L). Zeroes flags[0, nflags). Its first instruction lets the GEMM that
// depends on it launch (programmatic dependent launch).
extern "C" __global__ void __launch_bounds__(1024)
mxfp4_quantize_bands(const a_t *__restrict__ A, int lda, int M, int Ka, int K, u8 *__restrict__ qa,
                     float *__restrict__ qs, u32 *__restrict__ meta, int tok, u32 *__restrict__ flags, int nflags) {
  mx::pdl_launch_dependents();
  __shared__ u32 masks;
  const long long it = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (it < nflags) flags[it] = 0u;
  if (threadIdx.x == 0) masks = 0u;
  __syncthreads();
  const int nblk = K >> 5, nblk8 = (nblk + 7) & ~7;
  const int r = threadIdx.x >> 5, lane = threadIdx.x & 31, q = lane & 3, b = blockIdx.x * 8 + (lane >> 2);
  const bool ok = r < M && b < nblk && b * 32 < Ka;
  u32 sbyte;
  const u32 codes = mx::quantize_quarter<A_KIND>(A, (long long)r * lda + b * 32 + q * 8, ok, sbyte);
  u32 nz = (codes & 0x77777777u) != 0u;
  nz |= __shfl_xor_sync(0xffffffffu, nz, 1);
  nz |= __shfl_xor_sync(0xffffffffu, nz, 2);
  const bool isnan = sbyte == 255u, normal = nz && !isnan;
  // The bands' bases (scale bytes; a key of 0: no such block).
  const u32 top0 = __reduce_max_sync(0xffffffffu, normal ? sbyte + 1u : 0u);
  const u32 base0 = top0 > 4u ? top0 - 4u : 0u;
  const bool in0 = normal && sbyte >= base0;
  const u32 top1 = __reduce_max_sync(0xffffffffu, normal && !in0 ? sbyte + 1u : 0u);
  const u32 base1 = top1 > 4u ? top1 - 4u : 0u;
  const bool in1 = normal && !in0 && sbyte >= base1;
  const bool inl = (normal && !in0 && !in1) || isnan;
  const int band = in0 ? 0 : in1 ? 1 : inl ? 2 : 3;
  // Twice the e2m1 values, shifted: the positive codes' magnitudes, the negative ones' negated bytewise.
  const u32 sh = in0 ? sbyte - base0 : in1 ? sbyte - base1 : 0u;
  const u32 tl = 0x03020100u << sh, th = 0x0C080604u << sh;
  const u32 vlo = mx::e2m1x4_to_s8x4_shifted(codes & 0xFFFFu, tl, th);
  const u32 vhi = mx::e2m1x4_to_s8x4_shifted(codes >> 16, tl, th);
  const u32 at = (r >> 3) * 256 + (r & 7) * 16 + 4 * q;
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    u8 *tile = qa + ((long long)j * nblk8 + b) * tok * 32 + at;
    *(u32 *)tile = band == j ? vlo : 0u;
    *(u32 *)(tile + 128) = band == j ? vhi : 0u;
  }
  if (q == 0) {
    float *s = qs + (long long)b * tok + r;
    s[0] = top0 ? mx::half_scale(base0) : 0.0f;
    s[(long long)nblk8 * tok] = top1 ? mx::half_scale(base1) : 0.0f;
    s[2 * (long long)nblk8 * tok] = inl ? mx::half_scale(sbyte) : 0.0f;
  }
  const u32 bit = q == 0 ? 1u << (lane >> 2) : 0u;
  const u32 m = __reduce_or_sync(0xffffffffu, in0 ? bit : 0u) | (__reduce_or_sync(0xffffffffu, in1 ? bit : 0u) << 8) |
                (__reduce_or_sync(0xffffffffu, inl ? bit : 0u) << 16);
  if (lane == 0 && m) atomicOr(&masks, m);
  __syncthreads();
  if (threadIdx.x == 0) meta[blockIdx.x] = masks;
}
