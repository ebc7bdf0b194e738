"""The streaming GEMM's launch (``csrc/gemm_stream.cu``, ``params.StreamParams``): A's token rows quantized
from its dtype by ``quantize.cu``'s ``mxfp4_quantize_tokens`` into the call's workspace, then
``mxfp4_gemm_stream`` as its programmatic dependent, which starts streaming the weight before A is
ready."""
from __future__ import annotations

import torch

from ...device import sm_count
from ...params import Problem, StreamParams
from .. import runtime
from . import TOKEN_QUANT, Launch, a_defines, out_rows, rows, token_quantizer_config, weight

PTR, I32 = runtime.Param.PTR, runtime.Param.I32

GEMM = runtime.Signature("mxfp4_gemm_stream", qa=PTR, qs=PTR, W=PTR, Wsc=PTR, ldsc=I32, C=PTR, ldc=I32, M=I32,
                         N=I32, K=I32, part=PTR, flags=PTR)


class StreamLaunch(Launch):
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, Ka]) x W^T, M <= params.tokens, ``a``
    bf16, fp16 or float32 read as it is, as [M, K] with zero blocks past Ka: A quantized into the call's
    workspace (``params.workspace_offsets``: A's operand, the CTAs' flags and partial tiles), then the
    GEMM on one CTA an SM (or one a unit, where there are fewer), each an equal share of the units."""

    QUANTIZES_A = False
    __slots__ = ("grid", "offsets")

    @staticmethod
    def key(params: StreamParams, m: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
        return params, n, k, dtype, index  # the quantizer reads A's dtype

    QUANT, GEMM = TOKEN_QUANT, GEMM
    """The signatures of the quantizer and the GEMM the launch builds (the banded GEMM's launch names its own)."""

    def __init__(self, params: StreamParams, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> None:
        p = Problem(params.tokens, n, k)
        grid = params.grid(p, sm_count(device.index))
        quant = runtime.kernel("quantize.cu", self.QUANT, a_defines(None, dtype), device)
        smem = params.smem_bytes()
        gemm = runtime.kernel(params.source, self.GEMM, params.defines(), device, smem)
        configs = (self.quantizer_config(params, k, grid),
                   runtime.config((grid, 1, 1), params.threads, smem, None, dependent=True))
        self.grid, self.offsets = grid, params.workspace_offsets(p, grid)
        super().__init__(params, device, n, k, (quant, gemm), configs, self.offsets[-1])

    @staticmethod
    def quantizer_config(params: StreamParams, k: int, grid: int):
        return token_quantizer_config(params.tokens, k, grid)  # every CTA's flag zeroed

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a = self.operand(a, self.k)
        (m, ka), n, k, device = a.shape, self.n, self.k, self.device
        pa, lda = rows(a)
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params, 2, 8, "an even row stride and an 8-byte aligned start")
        (quant, gemm), (quant_config, gemm_config) = self.kernels, self.configs
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        qa = ws.data_ptr()
        qs, flags, part = (qa + o for o in self.offsets[:3])
        runtime.launch(quant, quant_config, device, pa, lda, m, ka, k, qa, qs, self.params.tokens, self.params.mt,
                       flags, self.grid)
        runtime.launch(gemm, gemm_config, device, qa, qs, pw, ps, ldsc, pc, ldc, m, n, k, part, flags)
        return out
