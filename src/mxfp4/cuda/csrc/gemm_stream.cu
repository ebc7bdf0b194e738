// Weight-streaming GEMM for decode sizes (M <= TOK = 8 * MT): C [M, N] = dequant(quant(A)) @ dequant(W)^T,
// W in aiter's shuffled layouts, in two launches chained by programmatic dependent launch.
//
// mxfp4_quantize_tokens (quantize.cu, tiles = MT) quantizes A once into a per-call workspace (as8: a
// block's TOK x 32 int8, twice the e2m1 values, in the order the weight's codes reach a lane's registers,
// a lane's bytes of its MT token tiles adjacent; sa: a block's TOK float32 half-scales, a lane's adjacent
// too; rows M..TOK-1 zeros) and zeroes the GEMM's fix-up flags. Its first instruction lets the GEMM
// launch, so the GEMM's first weight copies overlap it.
//
// mxfp4_gemm_stream: the work is cut into slices, one slice = a tile of ROWS = 16 * G weight rows by sl
// blocks of K, numbered tile-major (a tile's slices in K order); CTA i of the grid takes slices
// [S * i / grid, S * (i + 1) / grid) (stream-K: every CTA the same share to one slice, whatever the
// shape), in units: a unit is the slices of one chunk of KS blocks of a tile (chunks counted from the
// tile's start) that the CTA holds, so only a range's first and last unit can be short. sl is SLICE (8, a
// scale unit's blocks, or a round of every warp's, 4 KW, if more) where the CTAs hold 8 units or more
// each, else KS (a slice a unit). H100, same runs, against units: 16x8192x28672 (13.6 units a CTA) 65.6
// us against 68.4, 16x57344x8192 (27) 113.0 against 116.0, 32x10240x8192 (9.7) 40.6 against 42.0 (on
// units from 12 units a CTA); from 7.8 units a CTA down (1x8192x8192, 1x2304x16384) slices gained
// nothing. Warp roles: CWARPS = G * KW consumer warps and one producer warp, whose lanes issue each
// unit's bulk copies side by side into a ring of STAGES stages (the tile's G row groups of codes,
// each a contiguous run in the shuffled layout; its 32-row scale units; A's int8 values and
// half-scales of the unit's blocks from the workspace, L2-resident), completing on the stage's
// mbarrier; every consumer thread releases its own reads of a stage. At most INFLIGHT units are on the
// way at a time; the weight copies of the first go out before the producer waits for the quantizer.
// Consumer warp (gi, kw) takes row group gi and the blocks kw, kw + KW, ... of each unit: the four
// lanes of a row pair decode four blocks' weight scales (as accumulator starts, mx::fold_start) and
// share them by shuffles; the codes to int8 (SIGN_SPLIT: one byte-permute a 4 codes for the positive
// codes' magnitudes and one for the negative ones', two MMAs; else three byte-permutes a 4 codes, one
// MMA), mma.sync m16n8k32 s8 (W the row operand, A the column operand, exact int32 block sums), each
// sum put into its start's mantissa (the sum times the weight's half-scale, exactly) and added times
// A's half-scale to a float32 total (mx::block_sums, mma.cuh).
// At a tile's end the KW warps' totals are added in warp order through shared memory; a tile the
// CTA holds whole is rounded once and stored. A tile split between CTAs (at most the first and the
// last of a CTA's range) is summed by the CTA holding its last slice (the owner): the others store
// their partials in the workspace and set a flag; the owner, after its whole range, waits for the
// flags of those CTAs (all of lower index, so all already running) and adds the partials in CTA
// order, its own last, then rounds once. Deterministic: a shape always cuts the same way.
//
// Built with GROUPED, the grouped GEMM of a mixture of experts (mxfp4_gemm_stream_grouped, after
// quantize.cu's mxfp4_quantize_grouped): the same body (stream_gemm) over the tiles of every chunk of at
// most TOK rows of one expert (GroupedTiles), each chunk's A one TOK-row operand (a slot) and its expert's
// weight, found on the device from the offsets; the stream-K split shares all touched experts' units.
//
// Numerics: every block sum and every scaling is exact (inside the domain -147 <= ea + ew <= 112);
// the K/32 block terms are added in float32 in a fixed order, then rounded to bf16 (OUT_F32: stored
// as the float32 total).
#include "grouped.cuh"
#include "hopper.cuh"
#include "mma.cuh"
#include "streamk.cuh"

#ifndef MT
#error "MT, G, KW, KS and STAGES are set by the JIT"
#endif
#ifndef SIGN_SPLIT
#define SIGN_SPLIT 0  // 1: the codes' signs split over two MMAs (fewer integer instructions, twice the MMAs)
#endif
#ifndef ONE_TOKEN
#define ONE_TOKEN 0  // 1: M = 1, so only the MMAs' even columns (tokens 0, 2, 4, 6; rows 1.. are zeros) are summed
#endif
#ifndef GROUPED
#define GROUPED 0  // 1: the grouped GEMM of a mixture of experts (mxfp4_gemm_stream_grouped) instead of the dense one
#endif

namespace {

constexpr int TOK = 8 * MT;         // token rows held (M <= TOK)
constexpr int ROWS = 16 * G;        // weight rows of a tile
constexpr int CWARPS = G * KW;      // consumer warps
constexpr int CTHREADS = CWARPS * 32;
constexpr int THREADS = CTHREADS + 32;  // and the producer warp
constexpr int RP = ROWS + 4;        // row pitch of the totals in shared memory (floats; no bank conflicts)
constexpr int SLICE = 4 * KW > 8 ? 4 * KW : 8;  // blocks a slice: whole scale units, whole rounds (KW a power of 2)
constexpr int INFLIGHT = 2;         // units a CTA has on the way (issued, not yet arrived) at most

static_assert(MT == 1 || MT == 2 || MT == 4 || MT == 8, "MT must be 1, 2, 4 or 8");
static_assert(G % 2 == 0 && G >= 2, "G must be even: a tile holds whole 32-row scale units");
static_assert(KS % 8 == 0 && KS % (4 * KW) == 0,
              "KS must be a multiple of 8 (a scale chunk) and of 4 KW (a warp's blocks of a unit in rounds of 4)");
static_assert(STAGES >= INFLIGHT, "at least two stages (the units on the way)");
static_assert((KW & (KW - 1)) == 0, "KW must be a power of 2 (a slice holds whole scale units and rounds)");
static_assert(!ONE_TOKEN || MT == 1, "ONE_TOKEN is a one-token-tile variant");
static_assert(!(ONE_TOKEN && GROUPED), "a grouped call's chunks hold up to TOK rows: no one-token variant");
static_assert(THREADS <= 1024, "at most 1024 threads");
static_assert(G + G / 2 <= 30, "the producer warp's lanes 0 .. 1.5 G - 1 issue a unit's weight copies, 30 and 31 A's");

// The shared memory of a CTA, the one definition (params.StreamParams.smem_bytes states the same
// sizes; tests/test_stream.py checks it against smem_bytes below, read from the PTX).
struct Smem {
  static constexpr u32 W = G * KS * 256;               // a stage's codes: [G][KS][256]
  static constexpr u32 SC = (G / 2) * (KS / 8) * 256;  // its scale units: [G / 2][KS / 8][256]
  static constexpr u32 A8 = TOK * KS * 32;             // A's int8 values: [KS][TOK][32]
  static constexpr u32 SA = TOK * KS * 4;              // A's half-scales: [KS][TOK]
  static constexpr u32 STAGE = W + SC + A8 + SA;
  static constexpr u32 RING = STAGES * STAGE;
  static constexpr u32 RED = KW * TOK * RP * 4;        // the warps' totals of a tile: [KW][TOK][RP]
  static constexpr u32 OWN = TOK * RP * 4;             // the owned tile's partial: [TOK][RP]
  static constexpr u32 BARS = 2 * STAGES * 8;          // full[STAGES], empty[STAGES]
  static constexpr u32 BYTES = RING + RED + OWN + BARS;
};
static_assert(Smem::STAGE % 16 == 0 && Smem::W % 16 == 0 && Smem::A8 % 16 == 0, "bulk copies need 16-byte offsets");
static_assert(Smem::BYTES <= 227 * 1024, "the variant's shared memory exceeds the 227 KiB a CTA may have");

}  // namespace

extern "C" __constant__ u32 mxfp4_stream_smem_bytes = Smem::BYTES;

namespace {

// A unit: tile t, its first block kb0 and nb blocks.
struct Unit {
  int t, kb0, nb;
};

// A CTA's slice range [s, end) walked unit by unit (slices of sl blocks, spt a tile; nblk blocks of K):
// slice s is slice o of tile t, and left slices remain to its chunk's end (a range may begin inside a
// chunk; every later unit begins at one). Divides once, not a unit.
struct Walk {
  long long s, end;
  int t, o, left, sl, spt, nblk;
  __device__ __forceinline__ Walk(long long s0, long long e, int sl_, int spt_, int nblk_)
      : s(s0), end(e), sl(sl_), spt(spt_), nblk(nblk_) {
    t = (int)(s0 / spt_);
    o = (int)(s0 - (long long)t * spt_);
    left = KS / sl_ - o % (KS / sl_);
  }
  // The next unit (the range's first slice not walked yet): the rest of its chunk, tile and range.
  __device__ __forceinline__ Unit next() {
    const int n = (int)min((long long)min(left, spt - o), end - s);
    const Unit u = {t, o * sl, min(n * sl, nblk - o * sl)};
    s += n;
    o += n;
    if (o == spt) ++t, o = 0;
    left = KS / sl;
    return u;
  }
};

// Blocks b0, b0 + KW, b0 + 2 KW, b0 + 3 KW of row group gi into acc, as unit_blocks' fold takes them: the
// lanes of a row pair decode one block's starts each (lane t of the four the block b0 + t KW) and pass
// them round; every start's scale byte is <= 232.
__device__ __forceinline__ void fold_round(const u8 *wst, const u8 *ast, const float *sast, int b0, u32 e0, u32 e1,
                                           u32 tab, float (&acc)[MT][4]) {
  const u32 c0 = mx::fold_start(e0), c1 = mx::fold_start(e1);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int b = b0 + q * KW;
    mx::block_sums<MT, SIGN_SPLIT, ONE_TOKEN, true>(wst + b * 256, ast + b * TOK * 32, sast + b * TOK,
                                                    __shfl_sync(0xffffffffu, c0, q, 4),
                                                    __shfl_sync(0xffffffffu, c1, q, 4), 0.0f, 0.0f, tab, acc);
  }
}

// Adds one unit's blocks [kw, kw + KW, ... < nb) of row group gi into acc. A whole unit (nb == KS) whose
// warp's weight scale bytes are all <= 232 takes the fold: the four lanes of a row pair decode the
// accumulator starts of four blocks, one each, and pass them round by shuffles (each scale decoded once
// a warp, not four times), the unit's rounds unrolled. A short unit (a range's first or last, or a
// tile's last chunk) folds its whole rounds one by one, each round's scales voted on. The rest (a unit
// with a scale of 2**105 and up, or NaN, from that round on; blocks short of a round) block by block,
// each lane decoding its rows' half-scales.
__device__ __forceinline__ void unit_blocks(const u8 *stage, int gi, int kw, int nb, float (&acc)[MT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const u8 *wst = stage + gi * KS * 256 + g * 16 + t * 4;         // this lane's fragment bytes of block 0
  const u8 *sst = stage + Smem::W + (gi >> 1) * (KS / 8) * 256 + (gi & 1) + 4 * g;  // its rows' scale bytes
  const u8 *ast = stage + Smem::W + Smem::SC + (g * 4 + t) * 8 * MT;  // its A bytes of block 0, tokens g + 8 j
  const float *sast = (const float *)(stage + Smem::W + Smem::SC + Smem::A8) + 2 * MT * t;
  // offset of block b's scale bytes in a row's 32-row unit: mx::shuffled_scale_offset's column part
  auto scale_off = [](int b) { return (b >> 3) * 256 + 2 * ((b & 7) >> 2) + 64 * (b & 3); };
  const u32 tab = mx::thread_register(0x03020100u);
  if (nb == KS) {
    constexpr int R = KS / KW / 4;  // rounds of four blocks
    u32 e0[R], e1[R];
    bool big = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {  // lane t: the scale bytes of the round's block t
      const int so = scale_off(kw + (4 * r + t) * KW);
      e0[r] = sst[so];
      e1[r] = sst[so + 32];
      big |= max(e0[r], e1[r]) > 232u;
    }
    if (!__any_sync(0xffffffffu, big)) {
#pragma unroll
      for (int r = 0; r < R; ++r) fold_round(wst, ast, sast, kw + 4 * r * KW, e0[r], e1[r], tab, acc);
      return;
    }
  }
  int b = kw;
  if (nb < KS) {  // a short unit: its whole rounds folded one by one
#pragma unroll 1
    for (; b + 3 * KW < nb; b += 4 * KW) {
      const int so = scale_off(b + t * KW);
      const u32 e0 = sst[so], e1 = sst[so + 32];
      if (__any_sync(0xffffffffu, max(e0, e1) > 232u)) break;
      fold_round(wst, ast, sast, b, e0, e1, tab, acc);
    }
  }
#pragma unroll 1
  for (; b < nb; b += KW)
    mx::block_sums<MT, SIGN_SPLIT, ONE_TOKEN, false>(wst + b * 256, ast + b * TOK * 32, sast + b * TOK, 0x4B400000u,
                                                     0x4B400000u, mx::half_scale(sst[scale_off(b)]),
                                                     mx::half_scale(sst[scale_off(b) + 32]), tab, acc);
}

__device__ __forceinline__ void consumer_sync() { mx::named_barrier(1, CTHREADS); }

__device__ __forceinline__ void store_pair(out_t *C, int ldc, int tok, int n, float2 v) {
  mx::store_out2(C + (long long)tok * ldc + n, v);
}

// What one tile reads and writes: its weight rows from n0 (codes w, scale units wsc: its expert's weight),
// A's operand (values a8, half-scales as: block 0 of its token rows, TOK a block), its m token rows of C
// from row c.
struct TileRef {
  int n0, m;
  const u8 *w, *wsc, *a8;
  const float *as;
  out_t *c;
};

// The dense call's tiles: ceil(N / ROWS) tiles of one weight, M token rows.
struct DenseTiles {
  const u8 *qa;
  const float *qs;
  const u8 *W, *Wsc;
  out_t *C;
  int M, count;
  __device__ __forceinline__ TileRef at(int t) const { return {t * ROWS, M, W, Wsc, qa, qs, C}; }
};

#if GROUPED
// The grouped call's tiles: tpe N tiles (of one expert's N rows) a chunk, chunk-major; the chunks of at most
// TOK rows of one expert each (mx::GroupedChunks). Chunk j of expert e reads A's operand from slot
// ceil(start_e / TOK) + e + j (mxfp4_quantize_grouped's layout: a slot is one TOK-row operand of nblk
// blocks), its weight at e * w_stride and e * s_stride, and writes C's rows start_e + j TOK on.
struct GroupedTiles {
  const u8 *qa;
  const float *qs;
  const u8 *W, *Wsc;
  out_t *C;
  long long w_stride, s_stride;
  int ldc, nblk, tpe, count;
  mx::GroupedChunks chunks;
  __device__ __forceinline__ TileRef at(int t) const {
    const int c = t / tpe, nt = t - c * tpe;
    int e, r0, rows;
    const int slot = chunks.find<TOK>(c, e, r0, rows);
    const long long a = (long long)slot * nblk * TOK;
    return {nt * ROWS, rows, W + e * w_stride, Wsc + e * s_stride, qa + a * 32, qs + a, C + (long long)r0 * ldc};
  }
};
#endif

// The GEMM over `tiles` (N columns of each tile's weight, K): the producer warp streams each unit of the
// CTA's range into the ring, the consumers fold it; split tiles are summed by their owner (streamk.cuh).
// part [grid][TOK][ROWS] float32 and flags [grid]: the split tiles' partials and their flags (zeroed by the
// quantizer). C's row stride ldc (even; 8-byte aligned start).
template <class Tiles>
__device__ __forceinline__ void stream_gemm(u8 *smem, const Tiles &tiles, int ldsc, int ldc, int N, int K,
                                            float *__restrict__ part, u32 *__restrict__ flags) {
  u8 *ring = smem;
  float *red = (float *)(smem + Smem::RING);
  float *own = (float *)(smem + Smem::RING + Smem::RED);
  u64 *full = (u64 *)(smem + Smem::RING + Smem::RED + Smem::OWN);
  u64 *empty = full + STAGES;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nblk = K >> 5, cta = blockIdx.x, grid = gridDim.x;
  const int sl = (long long)tiles.count * ((nblk + KS - 1) / KS) >= 8LL * grid ? SLICE : KS, spt = (nblk + sl - 1) / sl;
  const long long slices = (long long)tiles.count * spt;
  const long long s_begin = slices * cta / grid, s_end = slices * (cta + 1) / grid;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&full[s], 1);
      mx::mbar_init(&empty[s], CTHREADS);  // every consumer thread releases its own reads
    }
    mx::fence_barrier_init();
  }
  __syncthreads();

  if (warp == CWARPS) {  // ---- the producer warp: its lanes issue a unit's copies side by side
    if (s_begin == s_end) return;
    // The range's i-th unit into stage i % STAGES. Lane 0 sets the stage's byte count (weight, before the
    // quantizer is waited for, and A); then lane c < G issues group c's codes, lane G + c scale unit c,
    // and (with A) lanes 30 and 31 A's values and half-scales: one thread issuing a unit's 2 + 1.5 G
    // copies one after another kept the ring from filling (H200: units of 16 blocks 1.2x slower than
    // units of 32 at 1x57344x8192).
    auto issue = [&](int i, const Unit &q, bool with_weight, bool with_a) {
      const int kb0 = q.kb0, nb = q.nb;
      const TileRef ref = tiles.at(q.t);
      const int n0 = ref.n0, groups = min(G, (N - n0) >> 4), sunits = (groups + 1) >> 1;
      u8 *st = ring + (i % STAGES) * Smem::STAGE;
      u64 *bar = &full[i % STAGES];
      if (with_weight) {
        if (lane == 0)
          mx::mbar_arrive_expect_tx(bar, (u32)(groups * nb * 256 + sunits * ((nb + 7) >> 3) * 256 + nb * TOK * 36));
        __syncwarp();
        if (lane < groups)
          mx::bulk_copy(st + lane * KS * 256, ref.w + (long long)((n0 >> 4) + lane) * 8 * K + kb0 * 256,
                        (u32)nb * 256u, bar);
        else if (lane >= G && lane < G + sunits)
          mx::bulk_copy(st + Smem::W + (lane - G) * (KS / 8) * 256,
                        ref.wsc + (long long)((n0 >> 5) + lane - G) * 32 * ldsc + (kb0 >> 3) * 256,
                        (u32)((nb + 7) >> 3) * 256u, bar);
      }
      if (with_a) {
        if (lane == 30)
          mx::bulk_copy(st + Smem::W + Smem::SC, ref.a8 + (long long)kb0 * TOK * 32, (u32)(nb * TOK * 32), bar);
        else if (lane == 31)
          mx::bulk_copy(st + Smem::W + Smem::SC + Smem::A8, ref.as + (long long)kb0 * TOK, (u32)(nb * TOK * 4), bar);
      }
    };
    // Unit i goes out once its stage is consumed and unit i - INFLIGHT has arrived: a ring issued whole
    // arrives whole (the copies share the bandwidth), then is consumed at once and refilled at once, and
    // the bursts stay; two on the way keep the copies spread (H100: 1x2304x16384 20.7 us against 23.5
    // on 5 stages, 1x8192x8192 25.6 against 26.9; 2-stage rings as before).
    Walk w(s_begin, s_end, sl, spt, nblk), wa = w;
    int first = 0;
    for (; first < INFLIGHT && w.s < s_end; ++first) issue(first, w.next(), true, false);
    mx::pdl_wait();  // A and the zeroed flags are the quantizer's
    for (int i = 0; i < first; ++i) issue(i, wa.next(), false, true);
    for (int i = first; w.s < s_end; ++i) {
      const Unit q = w.next();
      mx::mbar_wait(&empty[i % STAGES], mx::ring_parity<STAGES>(i) ^ 1);  // the stage's previous unit is consumed
      mx::mbar_wait(&full[(i - INFLIGHT) % STAGES], mx::ring_parity<STAGES>(i - INFLIGHT));  // i - INFLIGHT is in
      issue(i, q, true, true);
    }
    return;
  }

  // ---- the consumers
  const int gi = warp % G, kw = warp / G;
  float acc[MT][4];
  int owned = -1;  // the tile whose partial `own` holds (the CTA's first tile, begun by another CTA)
  int i = 0;       // units consumed: the range's i-th unit sits in stage i % STAGES
  for (Walk w(s_begin, s_end, sl, spt, nblk); w.s < s_end;) {
    const int t = w.t;
    const TileRef ref = tiles.at(t);
    const long long t0 = w.s - w.o, t1 = t0 + spt;
    const bool live = ref.n0 + gi * 16 < N;
#pragma unroll
    for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (; w.s < s_end && w.t == t; ++i) {
      const int nb = w.next().nb, st = i % STAGES;
      mx::mbar_wait(&full[st], mx::ring_parity<STAGES>(i));
      if (live) unit_blocks(ring + st * Smem::STAGE, gi, kw, nb, acc);
      mx::mbar_arrive(&empty[st]);
    }

    // The tile's end in this CTA: the KW warps' totals in warp order, then stored, owned or handed on.
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[(kw * TOK + j * 8 + 2 * tq + (e & 1)) * RP + gi * 16 + g + 8 * (e >> 1)] = acc[j][e];
    consumer_sync();
    const int n0 = ref.n0;
    const bool whole = t0 >= s_begin && t1 <= s_end, last = t1 <= s_end;
    for (int p = tid; p < TOK * ROWS / 2; p += CTHREADS) {
      const int tok = p / (ROWS / 2), r = 2 * (p % (ROWS / 2));
      if (tok >= ref.m || n0 + r >= N) continue;
      float2 v = *(const float2 *)(red + tok * RP + r);
#pragma unroll
      for (int q = 1; q < KW; ++q) {
        const float2 w = *(const float2 *)(red + (q * TOK + tok) * RP + r);
        v.x += w.x;
        v.y += w.y;
      }
      if (whole)
        store_pair(ref.c, ldc, tok, n0 + r, v);
      else if (last)
        *(float2 *)(own + tok * RP + r) = v;
      else
        *(float2 *)(part + ((long long)cta * TOK + tok) * ROWS + r) = v;
    }
    if (!whole && last) owned = t;
    consumer_sync();  // red is read (and the partial stored) before it is written again
    if (!last && tid == 0) mx::streamk_hand_on(flags, cta);
  }

  if (owned >= 0) {  // the first tile: the partials of the CTAs before, in order, then this CTA's
    const long long t0 = (long long)owned * spt;
    const int first = mx::streamk_cta_of(t0, slices, grid);
    if (tid == 0) mx::streamk_wait(flags, first, cta, slices, grid);
    consumer_sync();
    const TileRef ref = tiles.at(owned);
    const int n0 = ref.n0;
    mx::streamk_add_partials<TOK, ROWS, float2>(
        part, first, cta, ref.m, N, n0, tid, CTHREADS,
        [&](int tok, int r) { return *(const float2 *)(own + tok * RP + r); },
        [&](int tok, int r, float2 v) { store_pair(ref.c, ldc, tok, n0 + r, v); });
  }
}

}  // namespace

#if !GROUPED
// grid (CTAs, 1, 1), THREADS threads, Smem::BYTES of dynamic shared memory. qa / qs: the quantizer's
// workspace (one TOK-row operand); part [grid][TOK][ROWS] float32 and flags [grid]: the split tiles'
// partials and their flags (zeroed by the quantizer). C [M, N] with row stride ldc (even; 8-byte aligned
// start).
extern "C" __global__ void __launch_bounds__(THREADS, 1)
mxfp4_gemm_stream(const u8 *__restrict__ qa, const float *__restrict__ qs, const u8 *__restrict__ W,
                  const u8 *__restrict__ Wsc, int ldsc, out_t *__restrict__ C, int ldc, int M, int N, int K,
                  float *__restrict__ part, u32 *__restrict__ flags) {
  extern __shared__ __align__(128) u8 smem[];
  mx::require_dynamic_smem(Smem::BYTES);
  const DenseTiles tiles = {qa, qs, W, Wsc, C, M, (N + ROWS - 1) / ROWS};
  stream_gemm(smem, tiles, ldsc, ldc, N, K, part, flags);
}
#else
// The grouped GEMM of a mixture of experts, tokens sorted by expert: C [T, N] row t = quant(A) row t times
// the weight of its expert (expert e's rows [offsets[e-1], offsets[e]), int32 or int64 when off64), the E
// experts' weights stacked at a fixed stride (w_stride code bytes, s_stride scale bytes an expert). qa / qs:
// mxfp4_quantize_grouped's operand, a slot of TOK rows a chunk. Every CTA first finds the chunks (each
// non-empty expert's rows cut into chunks of TOK) from the offsets into its shared memory (mx::GroupedChunks,
// after Smem::BYTES: mx::grouped_chunks_bytes(E) more), on the device: no host read, graph capturable; the
// offsets were written before the quantizer ran, so they are read before the wait for it. Then the dense
// GEMM's stream-K split over the chunks' tiles. grid (CTAs, 1, 1) as the host sizes it for the most chunks
// T rows can make; CTAs without slices exit.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
mxfp4_gemm_stream_grouped(const u8 *__restrict__ qa, const float *__restrict__ qs, int T,
                          const void *__restrict__ offsets, int off64, int E, const u8 *__restrict__ W,
                          const u8 *__restrict__ Wsc, int ldsc, long long w_stride, long long s_stride,
                          out_t *__restrict__ C, int ldc, int N, int K, float *__restrict__ part,
                          u32 *__restrict__ flags) {
  extern __shared__ __align__(128) u8 smem[];
  mx::require_dynamic_smem(Smem::BYTES + mx::grouped_chunks_bytes(E));
  const mx::GroupedChunks chunks = mx::grouped_chunks<THREADS, TOK>(offsets, off64, E, T, (int *)(smem + Smem::BYTES));
  const int tpe = (N + ROWS - 1) / ROWS;
  const GroupedTiles tiles = {qa, qs, W, Wsc, C, w_stride, s_stride, ldc, K >> 5, tpe, chunks.count * tpe, chunks};
  stream_gemm(smem, tiles, ldsc, ldc, N, K, part, flags);
}
#endif
