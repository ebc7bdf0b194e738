// The Hopper primitives the kernels are built from: shared-memory addresses, mbarriers and the rings
// they pace, bulk copies, fences, named and cluster barriers, programmatic dependent launch and the
// flags between a grid's CTAs.
// Compiled by NVRTC with no system headers: only builtin types and intrinsics are used.
#pragma once
#include "mxfp4.cuh"

namespace mx {

__device__ __forceinline__ u32 smem_addr(const void *p) {
  return (u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(u64 *bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u64 *bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(smem_addr(bar))
               : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(u64 *bar, u32 bytes) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(
                   smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_wait(u64 *bar, u32 parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Rings of N stages, each with a full and an empty mbarrier. Step i (from 0) uses stage i % N; it waits
// for its full barrier's phase ring_parity<N>(i) and for its empty barrier's phase before, ring_parity ^ 1
// (which passes at once in the first round).
template <int N>
__device__ __forceinline__ u32 ring_parity(int i) {
  return (i / N) & 1;
}

// A ring walked in order, without a division: its stage and that step's parity, advanced a step.
template <int N>
__device__ __forceinline__ void ring_advance(int &stage, u32 &phase) {
  if (++stage == N) {
    stage = 0;
    phase ^= 1;
  }
}

// One bulk copy global -> shared (the copy engine; no tensor map), completing on an mbarrier.
// dst, src and bytes are multiples of 16.
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, u32 bytes, u64 *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Orders this thread's earlier shared-memory accesses (generic proxy, as seen through an mbarrier
// wait) before its later bulk copies (async proxy) into the same bytes.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void named_barrier(u32 id, u32 threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ u32 cluster_size() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The two halves of cluster_sync_relaxed, for work between a CTA's arrival and its wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}

// Programmatic dependent launch: the next kernel on the stream (launched with the attribute) may
// start once every CTA of this one has executed launch_dependents (or exited); wait blocks until
// the previous kernel has finished and its memory writes are visible.
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// A flag between CTAs of one grid: the writer's earlier global stores are visible to a reader that
// sees the flag set (release / acquire at GPU scope).
__device__ __forceinline__ void flag_release(u32 *flag, u32 value) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ u32 flag_acquire(const u32 *flag) {
  u32 v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

}  // namespace mx
