// The large-M kernels' workspace: what mxfp4_wgmma_prep writes for one call and the GEMMs copy into
// shared memory (nothing is kept between calls). Part of gemm_wgmma.cu's module: TN is its define.
//
// Both operands reach wgmma as int8 in shared memory in one layout: 128-byte rows (a token's or a
// weight row's 4 blocks of a half segment), 16-byte chunks swizzled (chunk ^ row % 8: the 128-byte
// swizzle), a block's 32 values permuted so that position 4t + j holds element 8t + j and position
// 16 + 4t + j holds element 8t + 4 + j (t = 0..3: a 4-byte word of the weight's codes gives both).
//
//     ablob [nseg][ntile] blobs of ABLOB bytes, one bulk copy per stage: the tile's int8 values as
//          two swizzle atoms (blocks 0-3, then 4-7), then the band multiplier per token (TN
//          floats), the per-block multipliers [8][TN] and the tokens' band masks (TN bytes);
//     for mxfp4_gemm_i8 only (the prep's CTAs from a_ctas on): wblob [ceil(N / 128)][nseg] blobs of
//          WBLOB bytes: the weight's values as int8 (its band's blocks shifted), multipliers [8][128],
//          each row's accumulator start, the tile's mask. mxfp4_gemm_cv's converter writes the same
//          layout into a slot of its shared memory.
#pragma once
#include "wgmma.cuh"

#define SEG 8                              // blocks per segment
#define TW 128                             // weight rows per CTA
#define META (TN * (5 + 4 * SEG))          // fold[TN], blk[SEG][TN] floats, the tokens' masks[TN]
#define ABLOB (TN * 128 * (SEG / 4) + META) // one token tile's segment: values, then meta
#define S_M (TN * 128 * (SEG / 4))         //   its meta (the values: SEG / 4 swizzle atoms of [TN][128])
#define PREP_THREADS 256                   // a prep CTA: 8 tokens of a (token tile, segment) of A, a warp
                                           // a token, or one weight tile-segment as int8 (mxfp4_gemm_i8)
// A weight tile's segment as int8 (mxfp4_gemm_i8's blob, mxfp4_gemm_cv's CV slot): values as A's, then
#define W_MULT (TW * 128 * (SEG / 4))      //   multipliers [SEG][TW] (float)
#define W_MAGIC (W_MULT + SEG * TW * 4)    //   the fold's accumulator start per row (u32)
#define W_MASK (W_MAGIC + TW * 4)          //   the tile's band mask (mxfp4_gemm_i8), or one a 32-row unit
#define WBLOB (W_MASK + 16)
