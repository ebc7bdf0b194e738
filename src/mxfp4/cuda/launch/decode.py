"""The launch of ``csrc/gemm_decode.cu``: the two-launch decode GEMM (``params.DecodeParams``), after the token
quantizer (``launch.token_quantizer``) put A's rows into the call's workspace (int8 values [K/32][rows][32],
then float32 half-scales); the GEMM is its programmatic dependent and starts streaming the weight before A is
ready."""
from __future__ import annotations

import torch

from ...params import SMEM_LIMIT, DecodeParams
from .. import runtime
from . import Launch, out_rows, split_cluster, token_quantizer, token_quantizer_config, weight

PTR, I32 = runtime.Param.PTR, runtime.Param.I32

GEMM = runtime.Signature("mxfp4_gemm_decode", qa=PTR, qs=PTR, W=PTR, Wsc=PTR, ldsc=I32, C=PTR, ldc=I32, M=I32,
                         N=I32, K=I32)


class DecodeLaunch(Launch):
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, K]) x W^T, M <= params.tokens:
    A quantized into the call's workspace (``params.workspace_bytes``), then the GEMM, a CTA per ``g``
    16-row groups and part of K (K split over clusters of ``params.split``)."""

    __slots__ = ()

    QUANTIZES_A = False

    @staticmethod
    def key(params: DecodeParams, m: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
        return params, n, k, dtype, index  # the quantizer reads A's dtype

    def __init__(self, params: DecodeParams, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> None:
        quant = token_quantizer(dtype, device)
        # The variant's shared memory grows with K / split: allow the most once, whatever shape loads it first.
        gemm = runtime.kernel(params.source, GEMM, params.defines(), device, SMEM_LIMIT)
        if params.split > 8:
            runtime.allow_large_cluster(gemm)
        gemm_config = runtime.config((-(-n // (16 * params.g)), 1, params.split), params.threads, params.smem_bytes(k),
                                     split_cluster(params.split), dependent=True)
        super().__init__(params, device, n, k, (quant, gemm), (token_quantizer_config(params.tokens, k), gemm_config),
                         params.workspace_bytes(k))

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a, pa, lda = self.operand(a, self.k)
        (m, ka), n, k, device = a.shape, self.n, self.k, self.device
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params, 2, 8, "an even row stride and an 8-byte aligned start")
        (quant, gemm), (quant_config, gemm_config) = self.kernels, self.configs
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        qa = ws.data_ptr()
        qs = qa + self.params.tokens * k
        runtime.launch(quant, quant_config, device, pa, lda, m, ka, k, qa, qs, self.params.tokens, 1, qa, 0)  # plain rows, no flags
        runtime.launch(gemm, gemm_config, device, qa, qs, pw, ps, ldsc, pc, ldc, m, n, k)
        return out
