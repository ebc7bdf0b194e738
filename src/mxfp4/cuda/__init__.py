"""The CUDA backend: kernel sources (csrc/), NVRTC compilation with a disk cache (jit), loading and
launching through the driver with typed kernel signatures (runtime), one launch object per GEMM family
(launch/), and the entry points behind the public ops (ops)."""
