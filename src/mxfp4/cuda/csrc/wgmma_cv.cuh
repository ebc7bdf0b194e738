// mxfp4_gemm_cv, the large-M GEMM that converts the weight itself (part of gemm_wgmma.cu's module,
// INT8_WEIGHT 0): the weight's codes as stored, converted to int8 in shared memory by a warpgroup of
// the CTA.
#pragma once
#include "wgmma_consumer.cuh"
#include "cluster.cuh"

// A CTA owns TN (64 or 128) tokens x 128 weight rows, 512 threads:
//   warp 0 streams the weight's codes as stored into the W ring, lane g a segment of 16-row group g by
//     one bulk copy (a group's K range is contiguous; the first STAGES stages before the register
//     moves; groups past N and blocks past K are not copied, and their stale bytes meet A's zeros or
//     land in rows that are not stored); warps 1 and 2 put
//     each row's eight exponent bytes of the segment beside them (from the scale bytes as stored);
//     warp 3 (lane 0) streams A's blobs from the prep into the A ring;
//   warpgroup 1, the converter: thread r owns weight row r; per segment the row's band (row_band),
//     its codes as int8 (its band's blocks shifted left by their exponent minus the band's smallest),
//     its multipliers and fold start, into a CV slot in the layout wgmma reads (A's: 128-byte swizzle,
//     a block's elements permuted the same way);
//   warpgroups 2 and 3, the consumers: wgmma with both operands in shared memory (TN 64: warpgroup c
//     64 tokens x weight rows 64c..64c+63, m64n64k32; TN 128: tokens 64c..64c+63 x 128 rows,
//     m64n128k32), then the fold and the terms as mxfp4_gemm_i8's.
// Three rings, so that each producer runs ahead of its consumer: the W ring (STAGES, codes from
// DRAM, released by the converter), the A ring (Smem::ASTAGES blobs from L2, released by the consumers)
// and the CV ring (Smem::SLOTS, filled by the converter, released by the consumers). At TN 64: 3 stages,
// 3 blobs, 3 slots (226,448 bytes); at TN 128: 4, 2, 2 (223,360).
namespace {

constexpr int THREADS = 512;       // the producers' warpgroup, the converter, two consumer warpgroups
constexpr int META_THREADS = 64;   // the exponent warps (1 and 2)
constexpr int CV_NW = TN == 64 ? 64 : 128;  // weight rows a consumer warpgroup covers

// The dynamic shared memory, offsets in bytes from its 1024-byte aligned start (the one definition:
// the module exports BYTES as mxfp4_wgmma_smem_bytes, which params.WgmmaParams.smem_bytes states).
struct Smem {
  static constexpr int CODES = 8 * SEG * 256;     // a stage of the W ring: 8 16-row groups' codes of SEG blocks,
  static constexpr int WSTAGE = CODES + TW * 8;   //   then each row's eight exponent bytes [TW][8]
  static constexpr int ASTAGES = TN == 64 ? 3 : 2;                      // A's blobs in the A ring
  static constexpr int ASTAGE = (ABlob::BYTES + 1023) / 1024 * 1024;
  static constexpr int SLOTS = TN == 64 ? 3 : 2;                        // converted tiles in the CV ring
  static constexpr int SLOT = (WBlob::BYTES + 1023) / 1024 * 1024;      // a WBlob: values, multipliers, starts, unit masks
  static constexpr int A = STAGES * WSTAGE;       // the W ring from 0, then the A ring
  static constexpr int C = A + ASTAGES * ASTAGE;  // the CV ring
  static constexpr int ZERO = C + SLOTS * SLOT;   // an 8-row atom of zeros: the A of blocks outside the fold
  static constexpr int BARS = ZERO + 1024;        // wfull, wempty [STAGES]; afull, aempty [ASTAGES]; cfull, cempty [SLOTS]
  static constexpr int BYTES = 1024 + BARS + 2 * (STAGES + ASTAGES + SLOTS) * 8;  // and up to 1024 to align the start
};

// Registers a thread at launch, then per warpgroup (setmaxnreg): the producers 40, the converter
// CV_REGS_CV, the consumers CV_REGS_MMA, within the CTA's 512 * CV_REGS. At 64 tokens a CTA takes
// 48K of the SM's 64K registers, so that a prep CTA (256 threads of 40) can run beside it (the
// weight's copies and conversions need nothing from the prep).
constexpr int CV_REGS = TN == 64 ? 96 : 128;
constexpr int CV_REGS_CV = TN == 64 ? 88 : 104;
constexpr int CV_REGS_MMA = TN == 64 ? 128 : 184;
static_assert(128 * 40 + 128 * CV_REGS_CV + 256 * CV_REGS_MMA <= THREADS * CV_REGS, "register pool");
// The staged output tile: in the W ring at S = 1, in the CV ring at S > 1 (the W ring holds the
// partials the other ranks read); WgmmaParams.check states the W ring's rule.
static_assert(TN * C_PITCH * 2 <= Smem::SLOTS * Smem::SLOT, "the CV ring holds the staged output tile (K split)");
static_assert(TN * C_PITCH * 2 <= STAGES * Smem::WSTAGE && CV_NW * 256 * 2 <= STAGES * Smem::WSTAGE,
              "the ring of codes must hold the output tile and the K split's partials (TN 128: at least 4 stages)");
static_assert(Smem::BYTES <= 227 * 1024, "the variant's shared memory exceeds the 227 KiB a CTA may have");

}  // namespace

// The body of both entry points at the end (GROUPED: offsets, off64, E, w_stride, s_stride as
// gemm_wgmma.cu states them).
__device__ __forceinline__ void gemm_cv(const u8 *__restrict__ ablob, const u8 *__restrict__ Wsc, int ldsc,
                                        const u8 *__restrict__ W, out_t *__restrict__ C, int ldc, int M, int N, int K,
                                        int ntile, int nwt, const void *__restrict__ offsets, int off64, int E,
                                        long long w_stride, long long s_stride) {
  extern __shared__ __align__(1024) u8 smem_raw[];
  u8 *smem = smem_raw + mx::smem_pad_1024(smem_raw);
  u64 *wfull = (u64 *)(smem + Smem::BARS), *wempty = wfull + STAGES;
  u64 *afull = wempty + STAGES, *aempty = afull + Smem::ASTAGES;
  u64 *cfull = aempty + Smem::ASTAGES, *cempty = cfull + Smem::SLOTS;
  mx::require_dynamic_smem(Smem::BYTES);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nblk = K >> 5, nseg = (nblk + SEG - 1) / SEG;
  // K split over the S CTAs of a cluster (1, 1, S): this CTA takes the rank-th of S near-equal runs
  // of segments (the host keeps S <= nseg, so every run has one).
  const u32 S = mx::cluster_size(), rank = mx::cluster_rank();
  const int s_lo = (int)((long long)nseg * rank / S), cnt = (int)((long long)nseg * (rank + 1) / S) - s_lo;
  int tT, tW;
  raster_tile(blockIdx.x, ntile, nwt, tT, tW);
  // The tile's token rows t0 .. M - 1 at most (GROUPED: one expert's chunk of rows, found from the
  // offsets as the prep found it, and that expert's weight; no chunk past the last).
  int t0 = tT * TN;
#if GROUPED
  {
    int rows;
    const int e = mx::grouped_item<THREADS, TN>(offsets, off64, E, M, tT, t0, rows);
    if (e < 0) return;  // the whole CTA (K is not split: no cluster)
    W += e * w_stride;
    Wsc += e * s_stride;
    M = t0 + rows;
  }
#endif
  const int n0 = tW * TW;
  // Stage `stage` <- segment s_lo + i of the tile's row groups that exist, blocks up to K: by warp 0, lane g
  // group g's copy (a bulk copy holds its issuing thread about 50 ns whatever its size, design.md's prep).
  const int groups = min(8, (N - n0) >> 4);
  auto copy_codes = [&](int i, int stage) {
    const int s = s_lo + i, nb = min(SEG, nblk - s * SEG);
    if (lane == 0) mx::mbar_arrive_expect_tx(&wfull[stage], (u32)(groups * nb * 256));
    __syncwarp();
    if (lane < groups)
      mx::bulk_copy(smem + stage * Smem::WSTAGE + lane * (SEG * 256),
                    W + ((long long)(n0 / 16 + lane) * 8 * K + s * SEG * 256), (u32)nb * 256u, &wfull[stage]);
  };

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&wfull[s], 1 + META_THREADS);  // the codes' expect_tx, the meta warps
      mx::mbar_init(&wempty[s], 128);               // the converter
    }
    for (int s = 0; s < Smem::ASTAGES; ++s) {
      mx::mbar_init(&afull[s], 1);
      mx::mbar_init(&aempty[s], 256);  // every consumer thread releases its own reads
    }
    for (int s = 0; s < Smem::SLOTS; ++s) {
      mx::mbar_init(&cfull[s], 128);
      mx::mbar_init(&cempty[s], 256);
    }
    mx::fence_barrier_init();
  }
  __syncthreads();

  if (warp < 4) {
    // The first stages of codes go out now, before the register moves (they need nothing from the prep).
    if (warp == 0)
      for (int i = 0; i < min(cnt, STAGES); ++i) copy_codes(i, i);
    mx::setmaxnreg_dec<40>();
    if (warp == 0) {
      // ---- the weight's codes, a stage's copies after the first STAGES (issued above) ----
      for (int i = STAGES; i < cnt; ++i) {
        const int stage = i % STAGES;
        mx::mbar_wait(&wempty[stage], mx::ring_parity<STAGES>(i) ^ 1);
        mx::fence_proxy_async();
        copy_codes(i, stage);
      }
    } else if (warp == 3) {
      // ---- A's blobs from the prep ----
      if (lane == 0) {
        mx::pdl_wait();
        int stage = 0;
        u32 phase = 0;
        for (int i = 0; i < cnt; ++i) {
          if (i >= Smem::ASTAGES) {
            mx::mbar_wait(&aempty[stage], phase ^ 1);
            mx::fence_proxy_async();
          }
          mx::mbar_arrive_expect_tx(&afull[stage], (u32)ABlob::BYTES);
          mx::bulk_copy(smem + Smem::A + stage * Smem::ASTAGE, ablob + ((long long)(s_lo + i) * ntile + tT) * ABlob::BYTES,
                        (u32)ABlob::BYTES, &afull[stage]);
          mx::ring_advance<Smem::ASTAGES>(stage, phase);
        }
      }
    } else {
      // ---- each row's eight exponent bytes of the segment (one u64, byte 255 past K), warps 1 and
      // 2: a lane holds rows r and r + 16 of a 32-row unit (4 words, 64 bytes apart, in the shuffled
      // layout) ----
      const int unit = (tid - 32) >> 4, r16 = lane & 15;
      const int ra = 32 * unit + r16, rb = ra + 16;
      const bool va = n0 + ra < N, vb = n0 + rb < N;
      const u8 *src = Wsc + (long long)((n0 >> 5) + unit) * 32 * ldsc + 4 * r16;
      auto load = [&](int s, u32 (&w)[4]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = va ? *(const u32 *)(src + s * 256 + 64 * j) : 0u;
      };
      u32 wn[4];
      load(s_lo, wn);
      int stage = 0;
      u32 phase = 0;
      for (int i = 0; i < cnt; ++i) {
        const int s = s_lo + i;
        u32 w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = wn[j];
        if (i + 1 < cnt) load(s + 1, wn);
        const u32 t01 = __byte_perm(w[0], w[1], 0x5140), t23 = __byte_perm(w[2], w[3], 0x5140);
        const u32 u01 = __byte_perm(w[0], w[1], 0x7362), u23 = __byte_perm(w[2], w[3], 0x7362);
        const int nb = min(SEG, nblk - s * SEG);
        const u64 past = nb < SEG ? ~0ull << (8 * nb) : 0ull;
        u64 exa = ((u64)__byte_perm(u01, u23, 0x5410) << 32 | __byte_perm(t01, t23, 0x5410)) | past;
        u64 exb = ((u64)__byte_perm(u01, u23, 0x7632) << 32 | __byte_perm(t01, t23, 0x7632)) | past;
        if (!va) exa = 0;  // rows past N (codes not copied, never stored): exponent bytes 0, any band
        if (!vb) exb = 0;
        if (i >= STAGES) mx::mbar_wait(&wempty[stage], phase ^ 1);
        u8 *st = smem + stage * Smem::WSTAGE + Smem::CODES;
        *(u64 *)(st + ra * 8) = exa;
        *(u64 *)(st + rb * 8) = exb;
        mx::mbar_arrive(&wfull[stage]);
        mx::ring_advance<STAGES>(stage, phase);
      }
    }
    return;
  }

  if (warp < 8) {
    // ---- the converter: thread r, weight row r ----
    mx::setmaxnreg_dec<CV_REGS_CV>();  // the consumers take what it leaves
    const int r = tid - 128;
    const u8 *code_row = smem + (r >> 4) * (SEG * 256) + (r & 15) * 16;  // + stage, + block * 256
    for (int i = 0; i < cnt; ++i) {
      const int stage = i % STAGES, slot = i % Smem::SLOTS;
      mx::mbar_wait(&wfull[stage], mx::ring_parity<STAGES>(i));
      if (i >= Smem::SLOTS) mx::mbar_wait(&cempty[slot], mx::ring_parity<Smem::SLOTS>(i) ^ 1);
      const u8 *wst = smem + stage * Smem::WSTAGE;
      u8 *cv = smem + Smem::C + slot * Smem::SLOT;
      const u64 ex = *(const u64 *)(wst + Smem::CODES + r * 8);
      uint4 code[SEG];  // every block's loads go out before the first conversion
#pragma unroll
      for (int b = 0; b < SEG; ++b) code[b] = *(const uint4 *)(code_row + stage * Smem::WSTAGE + b * 256);
      u32 band;
      const u32 base = fold_band(ex, band);
      ((u32 *)(cv + WBlob::MAGIC))[r] = fold_start_bits(base);
      const u32 umask = __reduce_and_sync(0xffffffffu, band);
      if (lane == 0) cv[WBlob::MASK + (r >> 5)] = (u8)umask;
      // The multipliers: with every exponent byte of the row's segment in 2..254 (normal halves) a
      // float's bits are (e - 1) << 23, one multiply-add; otherwise mx::half_scale, whose branches in
      // this, the CTA's busiest warpgroup, cost 1-2.5% of a call (A/B runs on the H200).
      const float fb = mx::half_scale(base);
      float *mult = (float *)(cv + WBlob::MULT) + r;
      const u32 lo2 = __vcmpgeu4((u32)ex, 0x02020202u) & __vcmpgeu4((u32)(ex >> 32), 0x02020202u);
      const u32 hi254 = __vcmpleu4((u32)ex, 0xFEFEFEFEu) & __vcmpleu4((u32)(ex >> 32), 0xFEFEFEFEu);
      if ((lo2 & hi254) == 0xFFFFFFFFu) {
#pragma unroll
        for (int b = 0; b < SEG; ++b)
          mult[b * TW] = (band >> b) & 1u ? fb : __uint_as_float(((u32)(ex >> (8 * b)) & 0xFFu) * (1u << 23) - (1u << 23));
      } else {
#pragma unroll
        for (int b = 0; b < SEG; ++b) mult[b * TW] = (band >> b) & 1u ? fb : mx::half_scale((u32)(ex >> (8 * b)) & 0xFFu);
      }
#pragma unroll
      for (int b = 0; b < SEG; ++b) {
        const u32 e = (u32)(ex >> (8 * b)) & 0xFFu;
        const bool in = (band >> b) & 1u;
        const u32 s = in ? e - base : 0u;
        const u32 tl = 0x03020100u << s, th = 0x0C080604u << s;  // the magnitudes 0 1 2 3 | 4 6 8 12, shifted
        const uint4 c = code[b];
        // a word's elements 0-3 into o0, 4-7 into o1
        const uint4 o0 = make_uint4(mx::e2m1x4_to_s8x4_shifted(c.x, tl, th), mx::e2m1x4_to_s8x4_shifted(c.y, tl, th),
                                    mx::e2m1x4_to_s8x4_shifted(c.z, tl, th), mx::e2m1x4_to_s8x4_shifted(c.w, tl, th));
        const uint4 o1 = make_uint4(
            mx::e2m1x4_to_s8x4_shifted(c.x >> 16, tl, th), mx::e2m1x4_to_s8x4_shifted(c.y >> 16, tl, th),
            mx::e2m1x4_to_s8x4_shifted(c.z >> 16, tl, th), mx::e2m1x4_to_s8x4_shifted(c.w >> 16, tl, th));
        u8 *row = cv + (b >> 2) * (TW * 128) + r * 128;
        *(uint4 *)(row + mx::swz128(r, (b & 3) * 32)) = o0;
        *(uint4 *)(row + mx::swz128(r, (b & 3) * 32 + 16)) = o1;
      }
      mx::mbar_arrive(&wempty[stage]);
      mx::fence_proxy_async();  // the int8 values reach wgmma (the async proxy) after the barrier
      mx::mbar_arrive(&cfull[slot]);
    }
    return;
  }

  // ---- consumers ----
  mx::setmaxnreg_inc<CV_REGS_MMA>();
  const int ctid = tid - 256, c = ctid >> 7, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const int tok_off = TN == 64 ? 0 : 64 * c, row_off = TN == 64 ? 64 * c : 0;
  const int tok0 = tok_off + 16 * wq + g, tok1 = tok0 + 8;  // this thread's two tokens (tile-local)
  int d[CV_NW / 2];
  float acc[CV_NW / 2];
#pragma unroll
  for (int i = 0; i < CV_NW / 2; ++i) acc[i] = 0.0f;
  const u64 zero_desc = zero_atom(smem + Smem::ZERO, ctid);
  int astage = 0, slot = 0;
  u32 aphase = 0, cphase = 0;
  for (int i = 0; i < cnt; ++i) {
    const int s = s_lo + i, nb = min(SEG, nblk - s * SEG);
    mx::mbar_wait(&afull[astage], aphase);
    mx::mbar_wait(&cfull[slot], cphase);
    const u8 *st = smem + Smem::A + astage * Smem::ASTAGE, *cv = smem + Smem::C + slot * Smem::SLOT;
    const float *fold = (const float *)(st + ABlob::FOLD), *blk = fold + TN;
    const float *wmult = (const float *)(cv + WBlob::MULT) + row_off;
    const u32 *wmagic = (const u32 *)(cv + WBlob::MAGIC) + row_off;
    // The mask of this warpgroup's 64 tokens and of its weight rows' 32-row units.
    const u32 umasks = *(const u32 *)(cv + WBlob::MASK);
    const u32 wmask = TN == 64 ? (umasks >> (16 * c)) & (umasks >> (16 * c + 8)) : umasks & (umasks >> 8) & (umasks >> 16) & (umasks >> 24);
    u32 fmask = tokens_mask<64>(st + ABlob::MASKS + tok_off, lane) & wmask & 0xFFu;
    if (__popc(fmask) < 2) fmask = 0;
    // Warp-uniform as ptxas can see it (a branch on a value it takes for divergent around wgmma
    // serializes every wgmma of the kernel, its note C7520).
    fmask = __shfl_sync(0xffffffffu, fmask, 0);
    add_segment(acc, d, fmask, nb, mx::smem_addr(st) + tok_off * 128, mx::smem_addr(cv) + row_off * 128, zero_desc,
                wmagic, wmult, fold, blk, tok0, tok1, t);
    mx::mbar_arrive(&aempty[astage]);
    mx::mbar_arrive(&cempty[slot]);
    mx::ring_advance<Smem::ASTAGES>(astage, aphase);
    mx::ring_advance<Smem::SLOTS>(slot, cphase);
  }

  // ---- K split: the S partial tiles added in rank order through distributed shared memory, each
  // rank adding and storing the S-th part of the tile (its accumulators j in [j0, j1)). The partials
  // go in the W ring, which no consumer reads and which is drained once the consumers have taken the
  // last CV slot (the converter read every stage before filling it); the output tile is staged in the
  // CV ring, drained too once every consumer has passed the first cluster barrier ----
  constexpr int J = CV_NW / 8;  // accumulator quads a thread
  int j0 = 0, j1 = J;
  if (S > 1) {
    float4 *part = (float4 *)smem;  // [J][256 consumer threads]
#pragma unroll
    for (int j = 0; j < J; ++j) part[j * 256 + ctid] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    mx::cluster_sync();  // every partial is written
    j0 = (int)(J * rank / S), j1 = (int)(J * (rank + 1) / S);
    for (u32 q = 0; q < S; ++q) {  // rank q's partial: its loads all go out before their adds
      float4 w[J];
#pragma unroll
      for (int j = 0; j < J; ++j) {
        if (j >= j0 && j < j1) w[j] = mx::cluster_ld_f32x4(mx::cluster_map(part + j * 256 + ctid, q));
      }
#pragma unroll
      for (int j = 0; j < J; ++j) {
        if (j >= j0 && j < j1) {  // rank 0's partial, then each next rank's added
          acc[4 * j] = q == 0 ? w[j].x : acc[4 * j] + w[j].x;
          acc[4 * j + 1] = q == 0 ? w[j].y : acc[4 * j + 1] + w[j].y;
          acc[4 * j + 2] = q == 0 ? w[j].z : acc[4 * j + 2] + w[j].z;
          acc[4 * j + 3] = q == 0 ? w[j].w : acc[4 * j + 3] + w[j].w;
        }
      }
    }
    // Every remote load above has returned (its value was used): the others may leave once they
    // pass their wait below.
    mx::cluster_arrive_relaxed();
  }

#if OUT_F32
  // ---- output: the float32 totals from registers, two columns a store ----
  store_totals<J>(C, ldc, M, N, t0 + tok0, t0 + tok1, n0 + row_off + 2 * t, acc, j0, j1);
#else
  // ---- output: staged as [token][weight row] (S = 1: in the drained W ring; else in the CV ring, as
  // the W ring holds the partials the other ranks read), written in 16-byte pieces. The CV ring is
  // free once both consumer warpgroups are past their loops: the cluster barrier above orders that,
  // and this CTA barrier says it to compute-sanitizer's racecheck, which reported the staging's
  // writes against the other warpgroup's last reads of the multipliers (tn 128) without it ----
  if (S > 1) mx::named_barrier(1, 256);
  u16 *ct = (u16 *)(smem + (S > 1 ? Smem::C : 0));
  stage_totals<J>(ct, tok0, tok1, row_off, t, acc, j0, j1);
  mx::named_barrier(1, 256);
  // This rank's 8-column chunks: j = chunk % J at TN 64 (the warpgroups' 64 rows each), the chunk at TN 128.
  write_staged(C, ldc, M, N, t0, n0, ct, ctid, [&](int ch) { return ch % J >= j0 && ch % J < j1; });
#endif
  if (S > 1) mx::cluster_wait();  // no CTA leaves while another reads its partial
}

#if GROUPED
extern "C" __global__ void __maxnreg__(CV_REGS)
mxfp4_gemm_cv_grouped(const u8 *__restrict__ ablob, const u8 *__restrict__ Wsc, int ldsc,
                      const u8 *__restrict__ W, out_t *__restrict__ C, int ldc, int M, int N, int K, int ntile,
                      int nwt, const void *__restrict__ offsets, int off64, int E, long long w_stride,
                      long long s_stride) {
  gemm_cv(ablob, Wsc, ldsc, W, C, ldc, M, N, K, ntile, nwt, offsets, off64, E, w_stride, s_stride);
}
#else
extern "C" __global__ void __maxnreg__(CV_REGS)
mxfp4_gemm_cv(const u8 *__restrict__ ablob, const u8 *__restrict__ Wsc, int ldsc,
              const u8 *__restrict__ W, out_t *__restrict__ C, int ldc, int M, int N, int K, int ntile, int nwt) {
  gemm_cv(ablob, Wsc, ldsc, W, C, ldc, M, N, K, ntile, nwt, nullptr, 0, 0, 0, 0);
}
#endif
