// mxfp4_gemm_i8, the large-M GEMM of the largest M (part of gemm_wgmma.cu's module, INT8_WEIGHT 1):
// both operands from the prep's blobs, nothing converted.
#pragma once
#include "wgmma_consumer.cuh"

static_assert(TN == 128, "mxfp4_gemm_i8 takes 128 tokens a CTA");

namespace {

constexpr int THREADS = 384;  // a producer warpgroup (warp 0 issues the copies), two consumer warpgroups

// The dynamic shared memory, offsets in bytes from its 1024-byte aligned start (the one definition:
// the module exports BYTES as mxfp4_wgmma_smem_bytes, which params.WgmmaParams.smem_bytes states).
struct Smem {
  static constexpr int W = (ABlob::BYTES + 1023) / 1024 * 1024;           // a stage: A's blob, then the weight's
  static constexpr int STAGE = (W + WBlob::BYTES + 1023) / 1024 * 1024;  // the ring: [STAGES][STAGE]
  static constexpr int ZERO = STAGES * STAGE;  // an 8-row atom of zeros: the A of blocks outside the fold
  static constexpr int BARS = ZERO + 1024;     // full[STAGES], empty[STAGES] (u64)
  static constexpr int BYTES = 1024 + BARS + 2 * STAGES * 8;  // and up to 1024 to align the start
};
// The bf16 output tile is staged in the drained ring, at 0.
static_assert(OUT_F32 || TN * C_PITCH * 2 <= STAGES * Smem::STAGE, "the ring holds the staged bf16 output tile");
static_assert(Smem::BYTES <= 227 * 1024, "the variant's shared memory exceeds the 227 KiB a CTA may have");

}  // namespace

// The int8 GEMM of the largest M (TN == 128): the weight comes as int8 from the prep as
// A does, so both operands stream through one ring by two bulk copies a stage and wgmma reads both
// from shared memory; the consumers convert nothing. A CTA owns 128 tokens (warpgroup c: tokens
// 64c .. 64c + 63) x 128 weight rows. A segment's blocks inside both bands (A's and W's masks)
// accumulate in one int32 sum started at the row's start bits (the fold, as mxfp4_gemm_cv's),
// scaled once by the token's multiplier; every other block is a term scaled by both multipliers.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
mxfp4_gemm_i8(const u8 *__restrict__ ablob, const u8 *__restrict__ wblob, out_t *__restrict__ C, int ldc, int M, int N,
              int K, int ntile, int nwt) {
  extern __shared__ __align__(1024) u8 smem_raw[];
  u8 *smem = smem_raw + mx::smem_pad_1024(smem_raw);
  u64 *full = (u64 *)(smem + Smem::BARS), *empty = full + STAGES;
  mx::require_dynamic_smem(Smem::BYTES);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nblk = K >> 5, nseg = (nblk + SEG - 1) / SEG;
  int tT, tW;
  raster_tile(blockIdx.x, ntile, nwt, tT, tW);
  const int n0 = tW * TW, t0 = tT * TN;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mx::mbar_init(&full[s], 1);
      mx::mbar_init(&empty[s], 256);
    }
    mx::fence_barrier_init();
  }
  __syncthreads();

  if (warp < 4) {
    mx::setmaxnreg_dec<40>();
    if (warp != 0) return;
    if (lane == 0) {
      mx::pdl_wait();  // both blobs come from the prep
      int stage = 0;
      u32 phase = 0;
      for (int s = 0; s < nseg; ++s) {
        mx::mbar_wait(&empty[stage], phase ^ 1);
        mx::fence_proxy_async();
        u8 *st = smem + stage * Smem::STAGE;
        mx::mbar_arrive_expect_tx(&full[stage], (u32)(ABlob::BYTES + WBlob::BYTES));
        mx::bulk_copy(st, ablob + ((long long)s * ntile + tT) * ABlob::BYTES, (u32)ABlob::BYTES, &full[stage]);
        mx::bulk_copy(st + Smem::W, wblob + ((long long)tW * nseg + s) * WBlob::BYTES, (u32)WBlob::BYTES, &full[stage]);
        mx::ring_advance<STAGES>(stage, phase);
      }
    }
    return;
  }

  mx::setmaxnreg_inc<232>();
  const int c = (warp >> 2) - 1, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const int tok0 = 64 * c + 16 * wq + g, tok1 = tok0 + 8;  // this thread's two tokens (tile-local)
  int d[64];
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const int ctid = tid - 128;
  const u64 zero_desc = zero_atom(smem + Smem::ZERO, ctid);
  int stage = 0;
  u32 phase = 0;
  for (int s = 0; s < nseg; ++s) {
    const int nb = min(SEG, nblk - s * SEG);
    mx::mbar_wait(&full[stage], phase);
    const u8 *st = smem + stage * Smem::STAGE, *wst = st + Smem::W;
    const float *fold = (const float *)(st + ABlob::FOLD), *blk = fold + TN;
    const float *wmult = (const float *)(wst + WBlob::MULT);
    const u32 *wmagic = (const u32 *)(wst + WBlob::MAGIC);
    // The mask of this warpgroup's 64 tokens and the weight tile's.
    u32 fmask = tokens_mask<64>(st + ABlob::MASKS + 64 * c, lane) & *(const u32 *)(wst + WBlob::MASK) & 0xFFu;
    if (__popc(fmask) < 2) fmask = 0;
    // Warp-uniform as ptxas can see it: a branch on a value it takes for divergent around wgmma
    // serializes every wgmma of the kernel (warning C7520).
    fmask = __shfl_sync(0xffffffffu, fmask, 0);
    add_segment(acc, d, fmask, nb, mx::smem_addr(st) + 64 * c * 128, mx::smem_addr(wst), zero_desc, wmagic, wmult,
                fold, blk, tok0, tok1, t);
    mx::mbar_arrive(&empty[stage]);
    mx::ring_advance<STAGES>(stage, phase);
  }

#if OUT_F32
  // ---- output: the float32 totals from registers, two columns a store (a warp's: 8 tokens x 32
  // bytes) ----
  store_totals<16>(C, ldc, M, N, t0 + tok0, t0 + tok1, n0 + 2 * t, acc, 0, 16);
#else
  // ---- output: staged in shared memory as [token][weight row], written in 16-byte pieces ----
  mx::named_barrier(1, 256);
  u16 *ct = (u16 *)smem;
  stage_totals<16>(ct, tok0, tok1, 0, t, acc, 0, 16);
  mx::named_barrier(1, 256);
  write_staged(C, ldc, M, N, t0, n0, ct, ctid, [](int) { return true; });
#endif
}
