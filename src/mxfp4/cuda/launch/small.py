"""The short-K kernel's launch (``csrc/gemm_small.cu``, ``params.SmallParams``): one launch, A quantized
inside it, no workspace."""
from __future__ import annotations

import torch

from ...params import SmallParams
from .. import runtime
from . import Launch, a_defines, out_rows, weight

PTR, I32 = runtime.Param.PTR, runtime.Param.I32

GEMM = runtime.Signature("mxfp4_gemm_small", A=PTR, lda=I32, W=PTR, Wsc=PTR, ldsc=I32, C=PTR, ldc=I32, M=I32,
                         N=I32, K=I32)


class SmallLaunch(Launch):
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, K]) x W^T at K = 32 * params.kb:
    a CTA per ``wg`` 16-row groups and tile of ``params.tokens`` rows (grid.y), in clusters of
    ``params.cluster`` along N, with ``params.smem_bytes()`` of dynamic shared memory. One launch on the
    current stream; nothing is allocated."""

    __slots__ = ()

    @staticmethod
    def key(params: SmallParams, m: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
        return params, params.m_tiles(m), n, dtype, index  # M enters through its tiles; K is the variant's

    def __init__(self, params: SmallParams, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> None:
        smem = params.smem_bytes()
        cluster = (params.cluster, 1, 1) if params.cluster > 1 else None
        gemm = runtime.kernel(params.source, GEMM, a_defines(params.defines(), dtype), device, smem)
        super().__init__(params, device, n, k, (gemm,),
                         (runtime.config((params.grid(n), params.m_tiles(m), 1), params.threads, smem, cluster),), 0)

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a, pa, lda = self.operand(a, self.k)
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params, 1, 1, "")
        runtime.launch(self.kernels[0], self.configs[0], self.device, pa, lda, pw, ps, ldsc, pc, ldc, a.shape[0],
                       self.n, self.k)
        return out
