// Distributed shared memory: the address in CTA `rank` of this cluster of an offset in our shared
// memory, and the loads and stores there (each a separate asm statement, so that a caller orders its
// address maps and accesses as it needs; the cluster's barriers are in hopper.cuh).
#pragma once
#include "hopper.cuh"

namespace mx {

// The shared::cluster address of p's offset in CTA `rank`'s shared memory.
__device__ __forceinline__ u32 cluster_map(const void *p, u32 rank) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(p)), "r"(rank));
  return remote;
}

__device__ __forceinline__ float cluster_ld_f32(u32 remote) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

__device__ __forceinline__ float4 cluster_ld_f32x4(u32 remote) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

__device__ __forceinline__ void cluster_st_f32(u32 remote, float x) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(x) : "memory");
}

__device__ __forceinline__ void cluster_st_u32x2(u32 remote, u32 x, u32 y) {
  asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(remote), "r"(x), "r"(y) : "memory");
}

}  // namespace mx
