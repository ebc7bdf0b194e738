// Banded weight-streaming GEMM (M <= TOK = 8 * MT, up to 32; the plan takes it at 17..32 rows of a large
// weight, where it measured faster than the streaming GEMM, gemm_stream.cu): C [M, N] = dequant(quant(A)) @
// dequant(W)^T, W in aiter's shuffled layouts as stored, in two launches chained by programmatic dependent
// launch: quantize.cu's mxfp4_quantize_bands writes A as the wgmma's B operand in three bands (below) and
// zeroes the fix-up flags; this GEMM streams the weight from its first instruction.
//
// Work: units of a tile of ROWS = 64 * WG weight rows by KS blocks of K (KS a multiple of 8: whole
// 256-element segments), numbered tile-major; CTA i of the grid takes units [U i / grid, U (i + 1) / grid)
// (stream-K: every CTA the same share to one unit). Warp roles: WG consumer warpgroups, warpgroup wg owning
// the tile's rows 64 wg .. 64 wg + 63, and a producer warpgroup (its registers given to the consumers by
// setmaxnreg) whose first warp's lanes issue a unit's bulk copies side by side into a ring of STAGES
// stages: the row groups' codes as stored (a group's K range is contiguous), the 32-row scale units, and
// A's bands and band scales of the unit's blocks (from the workspace, L2-resident; bands 1 and L only where
// the unit holds any).
//
// The numbers. A block's products are exact int32 sums of twice the e2m1 values (wgmma m64nTOKk32 s8, the
// weight in registers as the A operand, the tokens from shared memory as B). A segment's sums are added
// inside the tensor core, each block's shifted by its exponent above the segment's base, on both sides:
// - a token's blocks are cut by the quantizer into bands (quantize.cu): band 0 the blocks whose exponent
//   lies in the window of 4 below the largest, band 1 the same window below the largest of the rest, band L
//   the rest (and NaN blocks); in bands 0 and 1 a value is shifted left by its exponent minus the band's
//   base (at most 3: 12 << 3 still an int8), so the band's sum over the segment times 2**base is exact;
// - a weight row's blocks whose exponent lies in [lo, lo + 3] (lo: the row's smallest in the segment) are
//   converted shifted left by their exponent minus lo (the byte-permute table shifted, one funnel shift);
//   the others are W-loose. SPLIT: the codes' signs split over two accumulators (the positive codes'
//   magnitudes and the negative ones', one byte-permute for 4 codes each), which one integer add takes
//   apart; else one wgmma on signed codes (the negative magnitudes negated bytewise).
// The fold: per segment and band 0 / 1, 8 wgmma (pairs) into one accumulator (pair); then the sum put
// into the mantissa of the row's start (mx::fold_start(lo): 1.5 * 2**23 times the row's half-scale, |sum| <
// 2**22) gives the sum times the row's half-scale exactly, and one fma with the token's band half-scale adds
// the term. Blocks of band L, and W-loose blocks, are terms of their own (the loose pass): each its wgmma
// (pair), scaled by the row's start for that block (lo's, or the block's own exponent's, or for a scale
// byte above 232 the two-scale form) and the token's block or band half-scale. Every term is exact; the
// K/256 (and loose K/32) terms are added in float32 in a fixed order, then rounded once to bf16 (OUT_F32:
// stored as the float32 total). Deterministic: a shape always cuts and folds the same way; a row's path
// depends on the other rows of its warpgroup's tile (the W-loose blocks are the tile's), so its last bits
// can depend on them, always inside the bound.
//
// A tile split between CTAs (at most the first and last of a CTA's range) is summed by its owner, the
// partials in CTA order (csrc/streamk.cuh).
#include "hopper.cuh"
#include "streamk.cuh"
#include "wgmma.cuh"

#if !defined(MT) || !defined(SPLIT)
#error "MT, WG, KS, STAGES, DEPTH and SPLIT are set by the JIT"
#endif

namespace {

constexpr int TOK = 8 * MT;          // token rows held (M <= TOK), the wgmma's N
constexpr int ROWS = 64 * WG;        // weight rows of a tile
constexpr int CTHREADS = 128 * WG;   // consumer threads
constexpr int THREADS = CTHREADS + 128; // and the producer warpgroup (its first warp issues the copies)
// Registers a thread (setmaxnreg): the producer warpgroup gives its share to the consumers.
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = WG == 1 ? 240 : WG == 2 ? 232 : 152;
constexpr int SEGS = KS / 8;         // segments of a unit
constexpr int NBANDS = 3;            // A's bands: 0 and 1 folded, 2 (L) block by block
constexpr int MAXSEG = 512;          // segments of K held in the band table (K <= 131072)
constexpr int ACC = TOK / 2;         // a thread's accumulators: rows g, g + 8 of its warp, TOK / 4 token pairs

static_assert(MT == 1 || MT == 2 || MT == 4, "MT must be 1, 2 or 4");
static_assert(WG >= 1 && WG <= 3, "WG must be 1, 2 or 3");
static_assert(KS % 8 == 0 && KS >= 8 && KS <= 64, "KS must be a multiple of 8 (whole segments), at most 64");
static_assert(STAGES >= 2, "at least two stages");
static_assert(DEPTH == 2 || DEPTH == 4 || DEPTH == 6 || DEPTH == 8,
              "DEPTH (a fold's blocks in flight) must be 2, 4, 6 or 8");
static_assert(ROWS / 16 <= 16 && ROWS / 32 <= 8, "the producer's lanes 0..15 issue the codes, 16..23 the scales");

// The shared memory of a CTA, the one definition (params.BandParams.smem_bytes states the same sizes;
// tests/test_band.py checks it against smem_bytes below, read from the PTX).
struct Smem {
  static constexpr u32 W = ROWS * KS * 16;             // a stage's codes: [ROWS / 16][KS][256]
  static constexpr u32 WS = ROWS * KS;                 // its scale units: [ROWS / 32][KS / 8][256]
  static constexpr u32 AV = NBANDS * KS * TOK * 32;    // A's bands: [3][KS][TOK x 32] (desc_k32's layout)
  static constexpr u32 AS = NBANDS * KS * TOK * 4;     // their half-scales: [3][KS][TOK] float32
  static constexpr u32 STAGE = W + WS + AV + AS;
  static constexpr u32 RING = STAGES * STAGE;
  static constexpr u32 META = MAXSEG * 4;              // each segment's band masks (quantize.cu)
  static constexpr u32 SCAN = 2 * WG * SEGS * 64 * 16; // [2][WG][SEGS][64] {shifts lo, hi; exponents lo, hi}
  static constexpr u32 LO = 2 * WG * SEGS * 64 * 4;    // [2][WG][SEGS][64] the rows' lo
  static constexpr u32 LOOSE = 2 * WG * SEGS * 2 * 4;  // [2][WG][SEGS][2] W-loose blocks, by half warpgroup
  static constexpr u32 OWN = TOK * ROWS * 4;           // the owned tile's partial: [TOK][ROWS]
  static constexpr u32 BARS = (2 * STAGES + 1) * 8;    // full[STAGES], empty[STAGES], meta
  static constexpr u32 BYTES = RING + META + SCAN + LO + LOOSE + OWN + BARS;
};
static_assert(Smem::STAGE % 16 == 0 && Smem::W % 16 == 0 && Smem::WS % 16 == 0 && Smem::AV % 16 == 0,
              "bulk copies need 16-byte offsets");
static_assert(Smem::BYTES <= 227 * 1024, "the variant's shared memory exceeds the 227 KiB a CTA may have");

}  // namespace

extern "C" __constant__ u32 mxfp4_band_smem_bytes = Smem::BYTES;

#include "band_terms.cuh"

// grid (CTAs, 1, 1), THREADS threads, Smem::BYTES of dynamic shared memory. qa / qs / meta: the quantizer's
// bands ([3][nblk8][TOK x 32] int8, [3][nblk8][TOK] float32, nblk8 = K/32 rounded up to 8) and segment masks
// ([K/256] u32); part [grid][TOK][ROWS] float32 and flags [grid]: the split tiles' partials and their flags
// (zeroed by the quantizer). C [M, N] with row stride ldc.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
mxfp4_gemm_band(const u8 *__restrict__ qa, const float *__restrict__ qs, const u32 *__restrict__ meta,
                  const u8 *__restrict__ W, const u8 *__restrict__ Wsc, int ldsc, out_t *__restrict__ C, int ldc, int M,
                  int N, int K, float *__restrict__ part, u32 *__restrict__ flags) {
  extern __shared__ __align__(128) u8 smem[];
  mx::require_dynamic_smem(Smem::BYTES);
  u8 *ring = smem;
  u32 *segmask = (u32 *)(smem + Smem::RING);
  uint4 *scan = (uint4 *)(smem + Smem::RING + Smem::META);
  u32 *scanlo = (u32 *)(smem + Smem::RING + Smem::META + Smem::SCAN);
  u32 *loose = (u32 *)(smem + Smem::RING + Smem::META + Smem::SCAN + Smem::LO);
  float *own = (float *)(smem + Smem::RING + Smem::META + Smem::SCAN + Smem::LO + Smem::LOOSE);
  u64 *full = (u64 *)(smem + Smem::RING + Smem::META + Smem::SCAN + Smem::LO + Smem::LOOSE + Smem::OWN);
  u64 *empty = full + STAGES;
  u64 *meta_bar = empty + STAGES;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nblk = K >> 5, nblk8 = (nblk + 7) & ~7, nseg = nblk8 >> 3;
  if (nseg > MAXSEG) __trap();  // the band table holds MAXSEG segments (params.BAND_MAX_K)
  const int chunks = (nblk + KS - 1) / KS, tiles = (N + ROWS - 1) / ROWS;
  const long long units = (long long)tiles * chunks;
  const int cta = blockIdx.x, grid = gridDim.x;
  const long long u_begin = units * cta / grid, u_end = units * (cta + 1) / grid;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&full[s], 2);          // the weight's arrival and A's
      mx::mbar_init(&empty[s], CTHREADS);  // every consumer thread releases its own reads
    }
    mx::mbar_init(meta_bar, 32);
    mx::fence_barrier_init();
  }
  __syncthreads();

  if (warp >= 4 * WG) {  // ---- the producer warpgroup: its first warp's lanes issue a unit's copies side by side
    mx::setmaxnreg_dec<PRODUCER_REGS>();
    if (warp > 4 * WG) return;
    const int nunits = (int)(u_end - u_begin);
    // Unit u_begin + i into stage i % STAGES: lane 0 arrives with the weight's bytes (before the quantizer
    // is waited for) and with A's; lane c < ROWS / 16 copies row group c's codes, lane 16 + c scale unit c,
    // lanes 24 + 2 j and 25 + 2 j band j's values and half-scales (bands 1 and L only where a segment of
    // the unit holds any: the masks are the quantizer's).
    auto issue = [&](int i, bool with_weight, bool with_a) {
      const long long u = u_begin + i;
      const int t = (int)(u / chunks), kb0 = (int)(u % chunks) * KS, nb = min(KS, nblk - kb0);
      const int nb8 = (nb + 7) & ~7;
      const int n0 = t * ROWS, groups = min(ROWS / 16, (N - n0) >> 4), sunits = (groups + 1) >> 1;
      u8 *st = ring + (i % STAGES) * Smem::STAGE;
      u64 *bar = &full[i % STAGES];
      if (with_weight) {
        if (lane == 0) mx::mbar_arrive_expect_tx(bar, (u32)(groups * nb * 256 + sunits * (nb8 >> 3) * 256));
        __syncwarp();
        if (lane < groups)
          mx::bulk_copy(st + lane * KS * 256, W + (long long)((n0 >> 4) + lane) * 8 * K + kb0 * 256, (u32)nb * 256u,
                        bar);
        else if (lane >= 16 && lane < 16 + sunits)
          mx::bulk_copy(st + Smem::W + (lane - 16) * (KS / 8) * 256,
                        Wsc + (long long)((n0 >> 5) + lane - 16) * 32 * ldsc + (kb0 >> 3) * 256,
                        (u32)(nb8 >> 3) * 256u, bar);
      }
      if (with_a) {
        u32 present = 1u;  // band 0 always
        for (int sg = kb0 >> 3; sg < (kb0 + nb8) >> 3; ++sg) {
          const u32 m = segmask[sg];
          present |= ((m >> 8) & 0xFFu ? 2u : 0u) | ((m >> 16) & 0xFFu ? 4u : 0u);
        }
        const u32 bytes = nb8 * TOK * 36u * (1u + ((present >> 1) & 1u) + ((present >> 2) & 1u));
        if (lane == 0) mx::mbar_arrive_expect_tx(bar, bytes);
        __syncwarp();
        const int j = (lane - 24) >> 1;
        if (lane >= 24 && lane < 30 && ((present >> j) & 1u)) {
          if ((lane & 1) == 0)
            mx::bulk_copy(st + Smem::W + Smem::WS + j * KS * TOK * 32,
                          qa + ((long long)j * nblk8 + kb0) * TOK * 32, (u32)(nb8 * TOK * 32), bar);
          else
            mx::bulk_copy(st + Smem::W + Smem::WS + Smem::AV + j * KS * TOK * 4,
                          qs + ((long long)j * nblk8 + kb0) * TOK, (u32)(nb8 * TOK * 4), bar);
        }
      }
    };
    const int first = min(STAGES, nunits);
    for (int i = 0; i < first; ++i) issue(i, true, false);
    mx::pdl_wait();  // A, its masks and the zeroed flags are the quantizer's
    for (int sg = lane; sg < nseg; sg += 32) segmask[sg] = meta[sg];
    mx::mbar_arrive(meta_bar);
    __syncwarp();
    for (int i = 0; i < first; ++i) issue(i, false, true);
    for (int i = first; i < nunits; ++i) {
      mx::mbar_wait(&empty[i % STAGES], mx::ring_parity<STAGES>(i) ^ 1);  // the stage's previous unit is consumed
      issue(i, true, true);
    }
    return;
  }

  // ---- the consumers: warpgroup wg, warp w of it, fragment row g (and g + 8), token pair t
  mx::setmaxnreg_inc<CONSUMER_REGS>();
  const int wg = warp >> 2, w = warp & 3, g = lane >> 2, t = lane & 3, wtid = tid & 127;
  float acc[ACC];
  int owned = -1;  // the tile whose partial `own` holds (the CTA's first tile, begun by another CTA)
  int i = 0;       // units consumed: unit u_begin + i sits in stage i % STAGES
  mx::mbar_wait(meta_bar, 0);
  for (long long u = u_begin; u < u_end;) {
    const int tl = (int)(u / chunks);
    const long long t0 = (long long)tl * chunks, t1 = t0 + chunks, stop = min(u_end, t1);
    const int n0 = tl * ROWS;
#pragma unroll
    for (int j = 0; j < ACC; ++j) acc[j] = 0.0f;
    for (; u < stop; ++u, ++i) {
      const int s = i % STAGES, par = i & 1;
      mx::mbar_wait(&full[s], mx::ring_parity<STAGES>(i));
      const u8 *st = ring + s * Smem::STAGE;
      const int kb0 = (int)(u - t0) * KS, nb = min(KS, nblk - kb0), nsegu = (nb + 7) >> 3;

      // The weight rows' windows of this unit: thread wtid takes (segment, row) pairs wtid, wtid + 128, ...
      // of its warpgroup's 64 rows: the shifts (32: not in the window, or a block past K), the exponents,
      // lo; each warp ORs its 32 rows' W-loose blocks.
      for (int p = wtid; p < SEGS * 64; p += 128) {
        const int sg = p >> 6, r = p & 63, R = 64 * wg + r;
        u32 elo = 0x7F7F7F7Fu, ehi = 0x7F7F7F7Fu, qlo = 0x20202020u, qhi = 0x20202020u, lo = 127u, lbits = 0u;
        if (sg < nsegu) {
          if (n0 + R < N)
            row_exponents(st + Smem::W + (R >> 5) * (KS / 8) * 256 + sg * 256 + 4 * (R & 15), (R >> 4) & 1, elo, ehi);
          const int nv = min(8, nb - 8 * sg);  // blocks of the segment inside K
          const u32 vlo = nv >= 4 ? 0xFFFFFFFFu : (1u << (8 * nv)) - 1u;
          const u32 vhi = nv >= 8 ? 0xFFFFFFFFu : (nv <= 4 ? 0u : (1u << (8 * (nv - 4))) - 1u);
          const u32 mlo = elo | ~vlo, mhi = ehi | ~vhi;  // blocks past K: 0xFF, above any
          const u32 m2 = __vminu2(__vminu2(mlo & 0x00FF00FFu, (mlo >> 8) & 0x00FF00FFu),
                                  __vminu2(mhi & 0x00FF00FFu, (mhi >> 8) & 0x00FF00FFu));
          lo = min(m2 & 0xFFFFu, m2 >> 16);
          const u32 lo4 = lo * 0x01010101u, slo = mlo - lo4, shi = mhi - lo4;  // no borrow: every byte >= lo
          u32 olo = nonzero_bytes(slo & 0xFCFCFCFCu), ohi = nonzero_bytes(shi & 0xFCFCFCFCu);
          if (lo > 232u) olo = ohi = 0xFFFFFFFFu;  // no fold start: every block loose
          qlo = (slo & ~olo) | (0x20202020u & olo);
          qhi = (shi & ~ohi) | (0x20202020u & ohi);
          lbits = byte_bits(olo & vlo & 0x80808080u) | (byte_bits(ohi & vhi & 0x80808080u) << 4);
        }
        const int o = ((par * WG + wg) * SEGS + sg) * 64 + r;
        scan[o] = make_uint4(qlo, qhi, elo, ehi);
        scanlo[o] = lo;
        lbits = __reduce_or_sync(0xffffffffu, lbits);
        if (lane == 0) loose[((par * WG + wg) * SEGS + sg) * 2 + (r >> 5)] = lbits;
      }
      mx::named_barrier(1 + wg, 128);

      const u8 *wcode = st + (4 * wg + w) * KS * 256 + g * 16 + 4 * t;  // row g's codes of block 0 (g + 8: +128)
      const u32 av = mx::smem_addr(st + Smem::W + Smem::WS);
      const float *as = (const float *)(st + Smem::W + Smem::WS + Smem::AV);
      for (int sg = 0; sg < nsegu; ++sg) {
        Seg c;
        const int o = ((par * WG + wg) * SEGS + sg) * 64 + 16 * w + g, lw = ((par * WG + wg) * SEGS + sg) * 2;
        c.wc = wcode + sg * 8 * 256;
        c.as = as + sg * 8 * TOK;
        c.r0 = scan[o];
        c.r1 = scan[o + 8];
        c.a0 = av + sg * 8 * TOK * 32;
        c.c0 = row_start(scanlo[o]);
        c.c1 = row_start(scanlo[o + 8]);
        c.wl = warp_uniform(loose[lw] | loose[lw + 1]);
        c.am = warp_uniform(segmask[(kb0 >> 3) + sg]);
        if ((c.am >> 8) & 0xFFu)
          fold<true>(acc, c);
        else
          fold<false>(acc, c);
        loose_pass(acc, c);
      }
      mx::mbar_arrive(&empty[s]);
    }

    // The tile's end in this CTA: stored, owned or handed on. Thread's rows R0 = 64 wg + 16 w + g, R0 + 8.
    const bool whole = t0 >= u_begin && t1 <= u_end, last = t1 <= u_end;
    const int R0 = 64 * wg + 16 * w + g;
#pragma unroll
    for (int j = 0; j < ACC; ++j) {
      const int tok = 8 * (j >> 2) + 2 * t + (j & 1), R = R0 + 8 * ((j >> 1) & 1);
      if (whole) {
        if (tok < M && n0 + R < N) mx::store_out(C + (long long)tok * ldc + n0 + R, acc[j]);
      } else if (last) {
        own[tok * ROWS + R] = acc[j];
      } else {
        part[((long long)cta * TOK + tok) * ROWS + R] = acc[j];
      }
    }
    if (!whole && last) owned = tl;
    if (!last) {
      mx::named_barrier(4, CTHREADS);  // every consumer's partial is stored
      if (tid == 0) mx::streamk_hand_on(flags, cta);
    }
  }

  if (owned >= 0) {  // the first tile: the partials of the CTAs before, in order, then this CTA's
    const long long t0 = (long long)owned * chunks;
    const int first = mx::streamk_cta_of(t0, units, grid);
    if (tid == 0) mx::streamk_wait(flags, first, cta, units, grid);
    mx::named_barrier(4, CTHREADS);
    const int n0 = owned * ROWS;
    mx::streamk_add_partials<TOK, ROWS, float>(part, first, cta, M, N, n0, tid, CTHREADS,
                                               [&](int tok, int r) { return own[tok * ROWS + r]; },
                                               [&](int tok, int r, float v) {
                                                 mx::store_out(C + (long long)tok * ldc + n0 + r, v);
                                               });
  }
}
