"""The banded GEMM's launch (``csrc/gemm_band.cu``, ``params.BandParams``): A's token rows quantized from its
dtype into three bands by ``quantize.cu``'s ``mxfp4_quantize_bands`` in the call's workspace, then
``mxfp4_gemm_band`` as its programmatic dependent, which starts streaming the weight before A is ready."""
from __future__ import annotations

import torch

from ...params import BandParams
from .. import runtime
from . import out_rows, weight
from .stream import StreamLaunch

PTR, I32 = runtime.Param.PTR, runtime.Param.I32

QUANT = runtime.Signature("mxfp4_quantize_bands", A=PTR, lda=I32, M=I32, Ka=I32, K=I32, qa=PTR, qs=PTR, meta=PTR,
                          tok=I32, flags=PTR, nflags=I32)
GEMM = runtime.Signature("mxfp4_gemm_band", qa=PTR, qs=PTR, meta=PTR, W=PTR, Wsc=PTR, ldsc=I32, C=PTR, ldc=I32,
                         M=I32, N=I32, K=I32, part=PTR, flags=PTR)


class BandLaunch(StreamLaunch):
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, Ka]) x W^T, M <= params.tokens, ``a``
    bf16, fp16 or float32 read as it is, as [M, K] with zero blocks past Ka: A quantized into the call's
    workspace (``params.workspace_offsets``: A's bands, their masks, the CTAs' flags and partial tiles), a
    CTA a 256-element segment; then the GEMM on one CTA an SM (or one a unit, where there are fewer),
    each an equal share of the units. Built as the streaming GEMM's launch (its key, operand and the dtypes
    of A it reads too), with its own kernels and the quantizer's grid."""

    __slots__ = ()

    QUANT, GEMM = QUANT, GEMM

    @staticmethod
    def quantizer_config(params: BandParams, k: int, grid: int):
        segments = -(-k // 256)  # a CTA a segment, a warp a token row (at least 256 threads: every flag zeroed)
        return runtime.config((segments, 1, 1), 32 * params.tokens, 0, None)

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a, pa, lda = self.operand(a, self.k)
        (m, ka), n, k, device = a.shape, self.n, self.k, self.device
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params, 1, 1, "")
        (quant, gemm), (quant_config, gemm_config) = self.kernels, self.configs
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        qa = ws.data_ptr()
        qs, meta, flags, part = (qa + o for o in self.offsets[:4])
        runtime.launch(quant, quant_config, device, pa, lda, m, ka, k, qa, qs, meta, self.params.tokens, flags,
                       self.grid)
        runtime.launch(gemm, gemm_config, device, qa, qs, meta, pw, ps, ldsc, pc, ldc, m, n, k, part, flags)
        return out
