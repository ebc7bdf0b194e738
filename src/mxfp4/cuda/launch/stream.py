"""The streaming GEMM's launches (``csrc/gemm_stream.cu``): ``params.StreamParams``, A's token rows quantized
from its dtype by ``quantize.cu``'s ``mxfp4_quantize_tokens`` into the call's workspace, then
``mxfp4_gemm_stream`` as its programmatic dependent, which starts streaming the weight before A is
ready; ``params.GroupedStreamParams``, a mixture of experts' rows by ``mxfp4_quantize_grouped``, then
``mxfp4_gemm_stream_grouped`` (the GROUPED build) the same way."""
from __future__ import annotations

import torch

from ...device import sm_count
from ...params import GROUPED_STATIC_SMEM, SMEM_LIMIT, GroupedStreamParams, Problem, StreamParams
from .. import runtime
from . import TOKEN_QUANT, Launch, a_defines, grouped_key, offsets_arg, out_rows, token_quantizer_config, weight

PTR, I32, I64 = runtime.Param.PTR, runtime.Param.I32, runtime.Param.I64

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
        a, pa, lda = self.operand(a, self.k)
        (m, ka), n, k, device = a.shape, self.n, self.k, self.device
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


GROUPED_QUANT = runtime.Signature("mxfp4_quantize_grouped", A=PTR, lda=I32, T=I32, Ka=I32, K=I32, offsets=PTR,
                                  off64=I32, E=I32, as8=PTR, sa=PTR, tiles=I32, flags=PTR, nflags=I32)
GROUPED = runtime.Signature("mxfp4_gemm_stream_grouped", qa=PTR, qs=PTR, T=I32, offsets=PTR, off64=I32, E=I32, W=PTR,
                            Wsc=PTR, ldsc=I32, w_stride=I64, s_stride=I64, C=PTR, ldc=I32, N=I32, K=I32, part=PTR,
                            flags=PTR)


class GroupedStreamLaunch(Launch):
    """out [T, N] bf16 (float32 for ``params.tile.out_f32``): row t of quant(a [T, K]) times its expert's
    weight, the experts' weights stacked (expert e's N rows at row e * n_padded), tokens sorted by expert,
    ``offsets`` (int32 / int64 [E], on the device) their cumulative ends, read by both kernels: A's rows
    quantized into the call's workspace a chunk a slot (``params.workspace_offsets``), then the GEMM on one
    CTA an SM, each an equal share of the chunks' units. The grid depends on T and E, never on the offsets:
    no host read, graph capturable."""

    QUANTIZES_A = False
    __slots__ = ("grid", "offsets")

    key = staticmethod(grouped_key)

    def __init__(self, params: GroupedStreamParams, t: int, e: int, n: int, k: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        grid = params.grid(t, e, Problem(params.tokens, n, k), sm_count(device.index))
        quant = runtime.kernel("quantize.cu", GROUPED_QUANT, a_defines(None, dtype), device)
        smem = params.smem_bytes(e)
        # the most dynamic shared memory any E may ask, beside the chunk scan's static bytes: a build loads once
        gemm = runtime.kernel(params.source, GROUPED, params.defines(), device, SMEM_LIMIT - GROUPED_STATIC_SMEM)
        quant_config = runtime.config((-(-max(t * (k // 32) * 4, grid) // 256), 1, 1), 256, 4 * e, None)
        configs = (quant_config, runtime.config((grid, 1, 1), params.threads, smem, None, dependent=True))
        self.grid, self.offsets = grid, params.workspace_offsets(t, e, k, grid)
        super().__init__(params, device, n, k, (quant, gemm), configs, self.offsets[-1])

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
                 out: torch.Tensor, num_experts: int, n_padded: int) -> torch.Tensor:
        a, pa, lda = self.operand(a, self.k)
        (t, ka), n, k, device = a.shape, self.n, self.k, self.device
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params.tile, 2, 8, "an even row stride and an 8-byte aligned start")
        po, off64 = offsets_arg(offsets)
        (quant, gemm), (quant_config, gemm_config) = self.kernels, self.configs
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        qa = ws.data_ptr()
        qs, flags, part = (qa + o for o in self.offsets[:3])
        runtime.launch(quant, quant_config, device, pa, lda, t, ka, k, po, off64, num_experts, qa, qs,
                       self.params.tile.mt, flags, self.grid)
        runtime.launch(gemm, gemm_config, device, qa, qs, t, po, off64, num_experts, pw, ps, ldsc,
                       n_padded * (k // 2), n_padded * ldsc, pc, ldc, n, k, part, flags)
        return out
