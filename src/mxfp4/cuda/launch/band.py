"""The banded GEMM's launch (``csrc/gemm_band.cu``, ``params.BandParams``): A's token rows quantized from its
dtype into three bands by ``quantize.cu``'s ``mxfp4_quantize_bands`` in the call's workspace, then
``mxfp4_gemm_band`` as its programmatic dependent, which starts streaming the weight before A is ready."""
from __future__ import annotations

import torch

from ...device import sm_count
from ...params import BandParams, Problem
from .. import runtime
from . import Launch, out_rows, rows, rows_for_kernel, weight
from .stream import A_KINDS, quantizer_defines

PTR, I32 = runtime.Param.PTR, runtime.Param.I32

QUANT = runtime.Signature("mxfp4_quantize_bands", A=PTR, lda=I32, M=I32, Ka=I32, K=I32, qa=PTR, qs=PTR, meta=PTR,
                          tok=I32, flags=PTR, nflags=I32)
GEMM = runtime.Signature("mxfp4_gemm_band", qa=PTR, qs=PTR, meta=PTR, W=PTR, Wsc=PTR, ldsc=I32, C=PTR, ldc=I32,
                         M=I32, N=I32, K=I32, part=PTR, flags=PTR)


class BandLaunch(Launch):
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, Ka]) x W^T, M <= params.tokens, ``a``
    bf16, fp16 or float32 read as it is, as [M, K] with zero blocks past Ka: A quantized into the call's
    workspace (``params.workspace_offsets``: A's bands, their masks, the CTAs' flags and partial tiles), a
    CTA a 256-element segment; then the GEMM on one CTA an SM (or one a unit, where there are fewer),
    each an equal share of the units."""

    A_DTYPES = tuple(A_KINDS)
    __slots__ = ("grid", "offsets")

    @staticmethod
    def key(params: BandParams, m: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
        return params, n, k, dtype, index  # the quantizer reads A's dtype

    @staticmethod
    def operand(a: torch.Tensor, k64: int) -> torch.Tensor:
        """``a`` as given (its dtype, its K), rows the kernels can load (else a copy)."""
        return rows_for_kernel(a)

    def __init__(self, params: BandParams, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> None:
        p = Problem(params.tokens, n, k)
        grid = params.grid(p, sm_count(device.index))
        quant = runtime.kernel("quantize.cu", QUANT, quantizer_defines(dtype), device)
        smem = params.smem_bytes()
        gemm = runtime.kernel(params.source, GEMM, params.defines(), device, smem)
        segments = -(-k // 256)  # a CTA a segment, a warp a token row (at least 256 threads: every flag zeroed)
        configs = (runtime.config((segments, 1, 1), 32 * params.tokens, 0, None),
                   runtime.config((grid, 1, 1), params.threads, smem, None, dependent=True))
        self.grid, self.offsets = grid, params.workspace_offsets(p, grid)
        super().__init__(params, device, n, k, (quant, gemm), configs, self.offsets[4])

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a = self.operand(a, self.k)
        (m, ka), n, k, device = a.shape, self.n, self.k, self.device
        pa, lda = rows(a)
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
