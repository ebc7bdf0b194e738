// C[M, N] (bf16) = dequant(quant(A)) @ dequant(W)^T for large M, on the int8 warpgroup tensor cores
// (wgmma). Two launches, chained on one stream: the prep, then one of two GEMMs. One module a
// variant: the prep and the GEMM its INT8_WEIGHT names, each in a header of its own.
//
// mxfp4_wgmma_prep (wgmma_prep.cuh): A quantized into the call's workspace (wgmma_blob.cuh), its
//   tokens' bands (wgmma_band.cuh); for mxfp4_gemm_i8 also the weight as int8.
// mxfp4_gemm_cv (wgmma_cv.cuh, INT8_WEIGHT 0; TN 64 or 128, up to 512 tokens): the weight's codes as
//   stored, converted to int8 in shared memory by a warpgroup of the CTA.
// mxfp4_gemm_i8 (wgmma_i8.cuh, INT8_WEIGHT 1; TN 128, above): one CTA per 128 tokens x 128 weight
//   rows, both operands from the prep's blobs, nothing converted.
// Both GEMMs' consumers: wgmma_consumer.cuh (the fold and the terms); the wgmma primitives: wgmma.cuh.
//
// Numerics: every term is exact; the terms (at most K/32) are added in float32 in a fixed order and
// the total is rounded once to bf16 (error <= (K/32 - 1) * 2**-24 of the sum of magnitudes). Domain:
// -147 <= ea + ew <= 112 for every block.
#if !defined(TN) || !defined(STAGES) || !defined(INT8_WEIGHT)
#error "TN, STAGES and INT8_WEIGHT are set by the JIT"
#endif
// GROUPED 1 (a mixture of experts' prefill; the converting GEMM): the entry points are
// mxfp4_wgmma_prep_grouped and mxfp4_gemm_cv_grouped, the same bodies with A's rows sorted by expert,
// offsets (int32, or int64 when off64) their cumulative ends over E experts, read on the device. A token
// tile is a chunk of up to TN rows of one expert (mx::grouped_item, grouped.cuh: ntile bounds the chunks,
// those past the last do nothing), and its CTAs read that expert's weight: expert e's codes and scale
// bytes at e * w_stride and e * s_stride bytes.
#ifndef GROUPED
#define GROUPED 0
#endif
#if GROUPED && INT8_WEIGHT
#error "GROUPED runs the converting GEMM (INT8_WEIGHT 0)"
#endif
#include "grouped.cuh"
// OUT_F32 1 (out_t, mxfp4.cuh): C is float32, the GEMMs' float32 totals unrounded, stored from
// registers: no staging tile, so the shared memory is the bf16 variant's. Only the output differs.

#include "wgmma.cuh"

static_assert(TN == 64 || TN == 128, "token tile");

#include "wgmma_prep.cuh"
#if INT8_WEIGHT
#include "wgmma_i8.cuh"
#else
#include "wgmma_cv.cuh"
#endif

// The variant's sizes as its kernels define them, for the host to agree with (params.WgmmaParams and
// launch/wgmma.py state them again; tests/test_wgmma.py reads these from the PTX and compares).
extern "C" __constant__ u32 mxfp4_wgmma_smem_bytes = Smem::BYTES;  // the GEMM's dynamic shared memory
extern "C" __constant__ u32 mxfp4_wgmma_threads = THREADS;         // the GEMM's threads a CTA
extern "C" __constant__ u32 mxfp4_wgmma_prep_threads = PREP_THREADS;
extern "C" __constant__ u32 mxfp4_wgmma_ablob_bytes = ABlob::BYTES;
extern "C" __constant__ u32 mxfp4_wgmma_wblob_bytes = WBlob::BYTES;
extern "C" __constant__ u32 mxfp4_wgmma_segment_blocks = SEG;
