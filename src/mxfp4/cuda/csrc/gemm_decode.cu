// Decode-size GEMM (M <= TOK = 8 * MT): C [M, N] bf16 = dequant(quant(A)) @ dequant(W)^T in two
// launches chained by programmatic dependent launch (PDL).
//
// mxfp4_quantize_tokens (quantize.cu, the streaming GEMM's quantizer too) quantizes A once into a per-call
// workspace: as8 [K/32][TOK][32] int8 (twice the e2m1 values, in the order the weight's codes reach a
// thread's registers), then sa [K/32][TOK] float32 half-scales; rows M..TOK-1 are zeros. It lets the
// GEMM launch at once (griddepcontrol.launch_dependents), so the GEMM's weight loads overlap it.
//
// mxfp4_gemm_decode: grid (ceil(N / ROWS), 1, S) in clusters of (1, 1, S). A CTA owns G 16-row groups
// of the weight and the S-th part of K (whole blocks); its G * KW warps each take one group and one
// of KW parts of the CTA's K range. No producer warp and no ring: at entry every warp issues the
// loads of its first DEPTH blocks (two 4-byte loads a lane a block: the bytes of its mma.sync
// fragment, read once, not kept in L1) and the CTA decodes its weight scale bytes into float32
// half-scales; only then does it wait for the quantized A (griddepcontrol.wait) and copy its K range
// into shared memory. The main loop keeps DEPTH blocks in flight per warp while it converts a
// block's codes to int8 (three byte-permutes per 4 codes), multiplies on the int8 tensor cores
// (m16n8k32: exact int32 block sums; W the row operand, A the column operand) and adds each block's
// sum times both half-scales to a float32 total. The KW warps of a group add their totals in warp
// order through shared memory, the S CTAs of a cluster in rank order through distributed shared
// memory; the sum is rounded once to bf16. Deterministic; the only global workspace is A's.
// With SMEM_W (DecodeParams.smem_weight) the weight takes the copy engine instead: the CTA's scale
// loads go out first, then lane 0 of each warp issues one bulk copy of its K range (contiguous in the
// shuffled layout) into shared memory; the main loop reads each block's fragment bytes there.
//
// Numerics: every block sum and every scaling is exact (inside the domain -147 <= ea + ew <= 112);
// the K/32 block terms are added in float32 in a fixed order, then rounded to bf16.
#include "cluster.cuh"
#include "hopper.cuh"
#include "mma.cuh"

#ifndef MT
#error "MT, G, KW and DEPTH are set by the JIT"
#endif

// OUT_F32 1 (out_t, mxfp4.cuh): C is float32, the unrounded float32 total. Only the final store
// differs.

// SMEM_W 1: each warp's K range of the weight comes by one bulk copy into shared memory (DEPTH is
// then the main loop's unroll); 0: per-lane loads DEPTH blocks ahead into registers.
#ifndef SMEM_W
#define SMEM_W 0
#endif

namespace {

constexpr int WARPS = G * KW;
constexpr int THREADS = WARPS * 32;
constexpr int TOK = MT * 8;   // token rows the kernels hold (M <= TOK)
constexpr int ROWS = G * 16;  // weight rows a CTA owns

// The dynamic shared memory of a CTA that holds nb blocks of K (each CTA's layout is that of the
// cluster's largest part, ceil(K/32 / S) blocks), the one definition (params.DecodeParams.smem_bytes
// states the same sizes; tests/test_decode.py checks it against mxfp4_decode_smem_bytes below, read
// from the PTX): its regions in order, each a count of its elements.
struct Smem {
  int nb;
  constexpr int a8() const { return nb * TOK * 32; }           // u8: A's int8 values [nb][TOK][32]
  constexpr int sa() const { return nb * TOK; }                // float: A's half-scales [nb][TOK]
  constexpr int sw() const { return nb * ROWS; }               // float: the weight's half-scales [nb][ROWS]
  constexpr int red() const { return (KW + 1) * ROWS * TOK; }  // float: the warps' totals [KW][ROWS][TOK], the partial
  constexpr int bars() const { return SMEM_W ? (WARPS + 2) & ~1 : 1; }  // u64: A's copies' (SMEM_W: a warp's, to 16 B)
  constexpr int wslice() const { return (nb + KW - 1) / KW * 256; }    // a warp's K range of its group's codes
  constexpr int wsm() const { return SMEM_W ? WARPS * wslice() : 0; }  // u8: SMEM_W: the warps' codes [WARPS][wslice]
  constexpr int bytes() const { return a8() + (sa() + sw() + red()) * 4 + bars() * 8 + wsm(); }
};

// The most blocks of K a CTA can hold: the largest nb whose layout fits the 227 KiB a CTA may have.
constexpr int NB_FIT = [] {
  int nb = 0;
  while (Smem{nb + 1}.bytes() <= 227 * 1024) ++nb;
  return nb;
}();

static_assert(MT == 1 || MT == 2 || MT == 4 || MT == 8, "MT must be 1, 2, 4 or 8");
static_assert(G >= 1 && KW >= 1 && WARPS <= 32, "G * KW must be 1..32 warps");
static_assert(DEPTH >= 1 && DEPTH <= 16, "DEPTH must be in 1..16");
static_assert(NB_FIT >= 1, "the variant's shared memory exceeds the 227 KiB a CTA may have even at one block of K");

// Smem{nb}.bytes() for every nb up to NB_FIT (the host's size of a launch is entry ceil(K/32 / S)).
struct SmemTable {
  u32 bytes[NB_FIT + 1];
  constexpr SmemTable() : bytes{} {
    for (int nb = 0; nb <= NB_FIT; ++nb) bytes[nb] = (u32)Smem{nb}.bytes();
  }
};

__device__ __forceinline__ u32 ldg_stream(const u8 *p) {
  u32 v;
  asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

}  // namespace

extern "C" __constant__ SmemTable mxfp4_decode_smem_bytes = SmemTable();

// One CTA's work: output rows [tile * ROWS, +ROWS) of C [M, N] (M <= TOK) over the CTA's part of K
// (its cluster rank's), the weight W / Wsc (N rows) in aiter's shuffled layouts. load_a(as8, sa, bar,
// kb_begin, nb_cta) fills shared memory with the quantized A of blocks [kb_begin, kb_begin + nb_cta)
// in the layout [nb][TOK][32] / [nb][TOK] and returns once every thread sees it; it runs after the
// weight's first loads and scales, so it is where the kernel waits for the quantizer.
template <class LoadA>
__device__ __forceinline__ void decode_tile(const u8 *__restrict__ W, const u8 *__restrict__ Wsc, int ldsc,
                                            out_t *__restrict__ C, int ldc, int M, int N, int K, int tile,
                                            LoadA load_a) {
  extern __shared__ __align__(16) u8 smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const u32 S = mx::cluster_size(), rank = mx::cluster_rank();
  const int nblk = K >> 5;
  const int kb_begin = (int)((long long)nblk * rank / S), kb_end = (int)((long long)nblk * (rank + 1) / S);
  const int nb_cta = kb_end - kb_begin;
  const int nb_max = (nblk + (int)S - 1) / (int)S;

  const Smem L{nb_max};  // the host sizes shared memory for this many blocks
  u8 *as8 = smem;
  float *sa = (float *)(as8 + L.a8());
  float *sw = sa + L.sa();
  float *red = sw + L.sw();
  u64 *bar = (u64 *)(red + L.red());  // A's copies
#if SMEM_W
  u64 *wbar = bar + 1;                // [WARPS] each warp's weight copy
  u8 *wsm = (u8 *)(bar + L.bars());   // [WARPS][wslice], 16-byte aligned
  const int wslice = L.wslice();
#endif

  // This warp: group gi of the CTA, part kw of its K range.
  const int gi = warp % G, kw = warp / G;
  const int grp = tile * G + gi;
  const bool live = grp * 16 < N;
  const int lb0 = (int)((long long)nb_cta * kw / KW), lb1 = (int)((long long)nb_cta * (kw + 1) / KW);
  const int nb = live ? lb1 - lb0 : 0;

  // The weight's half-scales of the CTA's rows and blocks. In aiter's shuffled scale layout a
  // 256-byte chunk holds 32 rows x 8 blocks; the CTA's chunks go out in rounds of 16-byte loads.
  const int n0 = tile * ROWS, rows_valid = min(ROWS, N - n0);
  const int u0 = n0 >> 5, c0 = kb_begin >> 3;
  const int units = ((n0 + rows_valid - 1) >> 5) - u0 + 1, cols = ((kb_end - 1) >> 3) - c0 + 1;
  const int pieces = units * cols * 16;
  constexpr int U = 4;
  uint4 v[U];
  auto load_scales = [&](int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + u * THREADS + tid, chunk = i >> 4;
      v[u] = i < pieces ? *(const uint4 *)(Wsc + (long long)(u0 + chunk / cols) * 32 * ldsc + (c0 + chunk % cols) * 256 +
                                          (i & 15) * 16)
                        : make_uint4(0u, 0u, 0u, 0u);
    }
  };

#if SMEM_W
  // The scales' first round, then the weight: each warp's blocks are contiguous (nb * 256 bytes),
  // one bulk copy into shared memory, so the copy engine keeps a CTA's bytes in flight. The scales go
  // first: in the register path, issued behind the weight, they arrive behind it (a %globaltimer
  // timeline at 16x2112x7168: their decode ends 5 us into a 12 us kernel).
  load_scales(0);
  u8 *wmine = wsm + warp * wslice;
  if (lane == 0) {
    mx::mbar_init(&wbar[warp], 1);
    mx::fence_barrier_init();
    mx::mbar_arrive_expect_tx(&wbar[warp], (u32)nb * 256u);
    if (nb)
      mx::bulk_copy(wmine, W + (long long)grp * 8 * K + (long long)(kb_begin + lb0) * 256, (u32)nb * 256u, &wbar[warp]);
  }
#else
  // The weight's first DEPTH blocks go out before anything else, then the scales' first round.
  const u8 *wp = W + (long long)grp * 8 * K + (long long)(kb_begin + lb0) * 256 + g * 16 + t * 4;
  u32 lo[DEPTH], hi[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) {
    lo[d] = hi[d] = 0u;
    if (d < nb) {
      lo[d] = ldg_stream(wp + d * 256);
      hi[d] = ldg_stream(wp + d * 256 + 128);
    }
  }
  load_scales(0);
#endif

  for (int base = 0; base < pieces; base += U * THREADS) {
    if (base) load_scales(base);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + u * THREADS + tid, chunk = i >> 4;
      if (i >= pieces) continue;
      const u32 w4[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int o = (i & 15) * 16 + j;  // offset in the chunk: the inverse of mx::shuffled_scale_offset
        const int r = (u0 + chunk / cols) * 32 + ((o & 1) << 4) + ((o >> 2) & 15) - n0;
        const int b = (c0 + chunk % cols) * 8 + ((o >> 1) & 1) * 4 + (o >> 6) - kb_begin;
        if (r >= 0 && r < rows_valid && b >= 0 && b < nb_cta) sw[b * ROWS + r] = mx::half_scale((w4[j >> 2] >> (8 * (j & 3))) & 0xFFu);
      }
    }
  }
  for (int i = tid; i < nb_cta * ROWS; i += THREADS)  // rows past N: any finite scale (their codes are never used)
    if (i % ROWS >= rows_valid) sw[i] = 1.0f;

  // A's K range (rows 0..TOK-1 of the CTA's blocks) into as8 / sa, visible to every thread on return.
  if (threadIdx.x == 0) mx::require_dynamic_smem((u32)L.bytes());
  load_a(as8, sa, bar, kb_begin, nb_cta);

  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  const u8 *a_t = as8 + g * 32 + t * 8;
  const float *sa_t = sa + 2 * t;
  const float *sw_t = sw + gi * 16 + g;
#if SMEM_W
  const u8 *wt = wmine + g * 16 + t * 4;  // this lane's fragment bytes of a block, in shared memory
  // One block: its codes to int8, the MMA, the block sum scaled into the totals.
  auto step = [&](int d, int b) {
    const u32 l = *(const u32 *)(wt + b * 256), h = *(const u32 *)(wt + b * 256 + 128);
#else
  // One block: refill its register slot DEPTH blocks ahead, convert, MMA, scale into the totals.
  auto step = [&](int d, int b) {
    const u32 l = lo[d], h = hi[d];
    if (b + DEPTH < nb) {
      lo[d] = ldg_stream(wp + (b + DEPTH) * 256);
      hi[d] = ldg_stream(wp + (b + DEPTH) * 256 + 128);
    }
#endif
    u32 af[4];
    mx::weight_fragment(af, l, h);
    const int lb = lb0 + b;
    const float sw0 = sw_t[lb * ROWS], sw1 = sw_t[lb * ROWS + 8];
    mx::block_mmas<MT, false>(acc, af, a_t, sa_t, lb, 0x4B400000u, 0x4B400000u, sw0, sw1);
  };
  int b0 = 0;
#if SMEM_W
  mx::mbar_wait(&wbar[warp], 0);
#endif
  for (; b0 + DEPTH <= nb; b0 += DEPTH) {  // whole rounds: no test a block, the chains interleave
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) step(d, b0 + d);
  }
#if SMEM_W
#pragma unroll 1
  for (; b0 < nb; ++b0) step(0, b0);  // the rest, one small copy of the body
#else
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (b0 + d < nb) step(d, b0 + d);
#endif

  // The KW warps of a group: totals added in warp order. red[kw][row][tok].
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = gi * 16 + g + (e >> 1) * 8, tok = j * 8 + 2 * t + (e & 1);
      red[(kw * ROWS + row) * TOK + tok] = acc[j][e];
    }
  __syncthreads();
  float *part = red + KW * ROWS * TOK;  // [ROWS][TOK]
  for (int i = tid; i < ROWS * TOK; i += THREADS) {
    float s = red[i];
#pragma unroll
    for (int q = 1; q < KW; ++q) s += red[q * ROWS * TOK + i];
    part[i] = s;
  }
  if (S > 1)
    mx::cluster_sync();  // every CTA's partial is written
  else
    __syncthreads();
  // This CTA's share of the outputs (pairs of weight rows for one token), the S partials added in
  // rank order, rounded once.
  const int pairs = (ROWS / 2) * M;
  for (int p = (int)rank * THREADS + tid; p < pairs; p += (int)S * THREADS) {
    const int tok = p / (ROWS / 2), r = 2 * (p % (ROWS / 2));
    if (r >= rows_valid) continue;
    const float *src = part + r * TOK + tok;
    float v0[16], v1[16];  // every partial's loads go out before the first add
#pragma unroll
    for (u32 q = 0; q < 16; ++q) {
      if (q < S) {
        if (S > 1) {
          const u32 remote0 = mx::cluster_map(src, q), remote1 = mx::cluster_map(src + TOK, q);
          v0[q] = mx::cluster_ld_f32(remote0);
          v1[q] = mx::cluster_ld_f32(remote1);
        } else {
          v0[q] = src[0];
          v1[q] = src[TOK];
        }
      }
    }
    float s0 = v0[0], s1 = v1[0];
#pragma unroll
    for (u32 q = 1; q < 16; ++q) {
      if (q < S) {
        s0 += v0[q];
        s1 += v1[q];
      }
    }
    const int n = tile * ROWS + r;
    mx::store_out2(C + (long long)tok * ldc + n, make_float2(s0, s1));
  }
  if (S > 1) mx::cluster_sync_relaxed();  // no CTA leaves while another reads its partial
}

extern "C" __global__ void __launch_bounds__(THREADS)
mxfp4_gemm_decode(const u8 *__restrict__ qa, const float *__restrict__ qs, const u8 *__restrict__ W,
                  const u8 *__restrict__ Wsc, int ldsc, out_t *__restrict__ C, int ldc, int M, int N, int K) {
  // A's K range, quantized by mxfp4_quantize_tokens (TOK rows: contiguous in both arrays): two bulk
  // copies after the first launch is done.
  decode_tile(W, Wsc, ldsc, C, ldc, M, N, K, (int)blockIdx.x, [&](u8 *as8, float *sa, u64 *bar, int kb_begin, int nb) {
    const int tid = threadIdx.x;
    if (tid == 0) {
      mx::mbar_init(bar, 1);
      mx::fence_barrier_init();
    }
    __syncthreads();
    if (tid == 0) {
      mx::pdl_wait();
      const u32 b8 = (u32)(nb * TOK * 32), bs = (u32)(nb * TOK * 4);
      mx::mbar_arrive_expect_tx(bar, b8 + bs);
      mx::bulk_copy(as8, qa + (long long)kb_begin * TOK * 32, b8, bar);
      mx::bulk_copy(sa, qs + (long long)kb_begin * TOK, bs, bar);
    }
    mx::mbar_wait(bar, 0);
  });
}
