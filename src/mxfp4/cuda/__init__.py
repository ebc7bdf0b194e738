"""The CUDA backend: kernel sources (csrc/), NVRTC compilation with a disk cache (jit), loading and
launching through cuda.core (runtime), and the launches behind the public ops (ops)."""
