// The large-M kernels' workspace: what mxfp4_wgmma_prep writes for one call and the GEMMs copy into
// shared memory (nothing is kept between calls). Part of gemm_wgmma.cu's module: TN is its define.
//
// Both operands reach wgmma as int8 in shared memory in one layout: 128-byte rows (a token's or a
// weight row's 4 blocks of a half segment), 16-byte chunks swizzled (chunk ^ row % 8: the 128-byte
// swizzle), a block's 32 values permuted so that position 4t + j holds element 8t + j and position
// 16 + 4t + j holds element 8t + 4 + j (t = 0..3: a 4-byte word of the weight's codes gives both).
//
//     ablob [nseg][ntile] blobs of ABlob::BYTES, one bulk copy per stage (ABlob below);
//     for mxfp4_gemm_i8 only (the prep's CTAs from a_ctas on): wblob [ceil(N / 128)][nseg] blobs of
//          WBlob::BYTES (WBlob below). mxfp4_gemm_cv's converter writes the same layout into a slot
//          of its shared memory.
// The sizes are the module's exports (gemm_wgmma.cu), which params.WgmmaParams states again.
#pragma once
#include "wgmma.cuh"

namespace {

constexpr int SEG = 8;             // blocks of 32 elements a segment (params.SEGMENT_BLOCKS)
constexpr int TW = 128;            // weight rows a CTA
constexpr int PREP_THREADS = 256;  // a prep CTA: 8 tokens of a (token tile, segment) of A, a warp a
                                   // token, or one weight tile-segment as int8 (mxfp4_gemm_i8)

// One token tile's segment of A, offsets in bytes: its int8 values as SEG / 4 swizzle atoms of
// [TN][128] (blocks 0-3, then 4-7), then its meta.
struct ABlob {
  static constexpr int FOLD = TN * 128 * (SEG / 4);  // the band multiplier per token [TN] (float)
  static constexpr int BLK = FOLD + TN * 4;          // the per-block multipliers [SEG][TN] (float)
  static constexpr int MASKS = BLK + SEG * TN * 4;   // the tokens' band masks [TN] (u8)
  static constexpr int BYTES = MASKS + TN;
};

// One weight tile's segment as int8, offsets in bytes: its values as A's ([TW] rows), then
struct WBlob {
  static constexpr int MULT = TW * 128 * (SEG / 4);  // the multipliers [SEG][TW] (float)
  static constexpr int MAGIC = MULT + SEG * TW * 4;  // the fold's accumulator start per row [TW] (u32)
  static constexpr int MASK = MAGIC + TW * 4;        // the tile's band mask (mxfp4_gemm_i8), or one a 32-row unit
  static constexpr int BYTES = MASK + 16;
};
static_assert(ABlob::BYTES % 16 == 0 && WBlob::BYTES % 16 == 0, "bulk copies move multiples of 16 bytes");

}  // namespace
