"""@triton.jit kernels, one file per kernel family."""
