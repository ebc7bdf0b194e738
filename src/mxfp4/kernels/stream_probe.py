"""The streaming-floor probe: one launch that reads the packed weight and its scales once, writes C.

@triton.jit code only; the launcher and its PyTorch twin are in :mod:`mxfp4.bench.providers`.

No GEMM arithmetic and A is not read: what is left is the cost of one launch that streams the
weight bytes from cold DRAM, reduces them and stores a bf16 C, which a one-launch A4W4 GEMM can
only beat by streaming better than this does.
"""
import triton
import triton.language as tl


@triton.jit
def stream_probe_kernel(w_ptr, n_words, s_ptr, n_scale_bytes, c_ptr, n_c, s_per_prog, c_per_prog,
                        W_BLOCK: tl.constexpr, S_BLOCK: tl.constexpr, C_BLOCK: tl.constexpr, C_ITERS: tl.constexpr):
    """Program p xors its W_BLOCK int32 weight words and its ``s_per_prog`` scale bytes (one load
    each) and writes ``(xor & 0xFF)`` as bf16 to its ``c_per_prog`` elements of the flat C."""
    pid = tl.program_id(0)
    w_offs = pid * W_BLOCK + tl.arange(0, W_BLOCK)
    w = tl.load(w_ptr + w_offs, mask=w_offs < n_words, other=0)
    s_local = tl.arange(0, S_BLOCK)
    s_offs = pid * s_per_prog + s_local
    s = tl.load(s_ptr + s_offs, mask=(s_local < s_per_prog) & (s_offs < n_scale_bytes), other=0)
    x = tl.xor_sum(w, axis=0) ^ tl.xor_sum(s.to(tl.int32), axis=0)
    value = tl.full([C_BLOCK], 0, tl.float32) + (x & 0xFF).to(tl.float32)
    c_start = pid * c_per_prog
    for i in range(C_ITERS):  # C_ITERS = cdiv(c_per_prog, C_BLOCK)
        c_local = i * C_BLOCK + tl.arange(0, C_BLOCK)
        c_offs = c_start + c_local
        tl.store(c_ptr + c_offs, value.to(tl.bfloat16), mask=(c_local < c_per_prog) & (c_offs < n_c))
