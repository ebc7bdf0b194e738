// Hopper's warpgroup MMA (wgmma) on int8 and what feeds it: shared-memory descriptors of the 128-byte
// swizzle, the fences and waits around an MMA group and register moves between warpgroups. Used by the
// large-M kernels (gemm_wgmma.cu), the banded GEMM (gemm_band.cu, whose weight operand comes from
// registers: wgmma_rs_s8) and the int8 peak (wgmma_peak.cu).
#pragma once
#include "hopper.cuh"

namespace mx {

// The warpgroup's registers a thread from here on (setmaxnreg): lowered by a producer warpgroup,
// raised by a consumer one, within what the CTA was launched with.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N of this warpgroup's committed groups are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// The accumulators as the MMAs left them: no use of them moves above the wait.
template <int R>
__device__ __forceinline__ void fence_regs(int (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Shared-memory descriptor of a K-major operand in the 128-byte swizzle: rows of 128 bytes, 8-row
// atoms 1024 bytes apart; `addr` is the atom-aligned start plus the k offset in bytes.
__device__ __forceinline__ u64 desc_sw128(u32 addr) {
  return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

// Byte o (0..127) of row r in the 128-byte swizzle: its 16-byte chunk ^ r % 8.
__device__ __forceinline__ u32 swz128(int r, int o) { return (u32)((((o >> 4) ^ (r & 7)) << 4) | (o & 15)); }

// D (64 x 128, s32) += A (64 x 32 s8) * B (128 x 32 s8), both from shared memory (descriptors).
__device__ __forceinline__ void wgmma_ss_s8(int (&d)[64], u64 da, u64 db) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1;"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
      : "l"(da), "l"(db));
}

// D (64 x 64, s32) += A (64 x 32 s8) * B (64 x 32 s8), both from shared memory (descriptors).
__device__ __forceinline__ void wgmma_ss_s8(int (&d)[32], u64 da, u64 db) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1;"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
      : "l"(da), "l"(db));
}

// D (64 x N, s32) = A (64 x 32 s8, this warpgroup's registers: the m16n8k32 fragment of its warp's 16 rows)
// * B (N x 32 s8, K-major in shared memory, descriptor), plus D where ACCUMULATE (an immediate; without
// it D is an output only, so that ptxas sees no read of it). N = 8, 16, 32.
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_rs_s8(int (&d)[4], const u32 (&a)[4], u64 db) {
  if constexpr (ACCUMULATE)
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, 1;"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, 0;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_rs_s8(int (&d)[8], const u32 (&a)[4], u64 db) {
  if constexpr (ACCUMULATE)
    asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, 1;"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, 0;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_rs_s8(int (&d)[16], const u32 (&a)[4], u64 db) {
  if constexpr (ACCUMULATE)
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, 1;"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, 0;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7]), "=r"(d[8]), "=r"(d[9]), "=r"(d[10]), "=r"(d[11]), "=r"(d[12]), "=r"(d[13]), "=r"(d[14]), "=r"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// Shared-memory descriptor of a K-major int8 operand of 32 bytes a row, no swizzle: 8-row core matrices of
// 16-byte rows (128 bytes), the row's second 16 bytes 128 bytes on (LBO), the next 8 rows 256 bytes on (SBO):
// row n, byte k at (n / 8) * 256 + (k / 16) * 128 + (n % 8) * 16 + k % 16. desc_k32_lo: its low word (the
// address field and LBO), to which an operand further on in shared memory adds its offset in 16-byte units
// (no carry out of the address field: shared memory ends below 2**18 bytes); desc_k32_of: the descriptor of
// such a low word (the high word, SBO, the same for every operand).
__device__ __forceinline__ u32 desc_k32_lo(u32 addr) { return ((addr & 0x3FFFFu) >> 4) | ((128u >> 4) << 16); }

__device__ __forceinline__ u64 desc_k32_of(u32 lo) {
  u64 d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"(lo), "r"(256u >> 4));
  return d;
}

__device__ __forceinline__ u64 desc_k32(u32 addr) { return desc_k32_of(desc_k32_lo(addr)); }

// The bytes from shared-memory pointer p to the next 1024-byte boundary (the 128-byte swizzle's
// atoms): `smem_raw + smem_pad_1024(smem_raw)` aligns the dynamic shared memory by an offset from
// the array (not through an integer cast), so the compiler keeps the shared address space and every
// access through it is an LDS / STS, not a generic load.
__device__ __forceinline__ u32 smem_pad_1024(const void *p) { return (1024u - (smem_addr(p) & 1023u)) & 1023u; }

}  // namespace mx
