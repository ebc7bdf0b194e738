"""The large-M kernels' launch (``csrc/gemm_wgmma.cu``, ``params.WgmmaParams``: one module a variant, the prep
and the GEMM its defines name): the prep quantizes A into the GEMM's int8 operand in the call's workspace
(with ``params.int8_weight`` the weight as int8 beside it), then the wgmma GEMM as its programmatic
dependent. ``GroupedWgmmaLaunch``: the same two kernels built with GROUPED, over a mixture of experts'
rows (``params.GroupedWgmmaParams``)."""
from __future__ import annotations

import torch

from ...params import SEGMENT_BLOCKS, GroupedWgmmaParams, WgmmaParams
from .. import runtime
from . import Launch, a_defines, grouped_key, offsets_arg, out_rows, split_cluster, weight

PTR, I32 = runtime.Param.PTR, runtime.Param.I32

PREP = runtime.Signature("mxfp4_wgmma_prep", A=PTR, lda=I32, M=I32, K=I32, W=PTR, Wsc=PTR, ldsc=I32, N=I32, ablob=PTR,
                         wblob=PTR, ntile=I32, a_ctas=I32)
GEMM_I8 = runtime.Signature("mxfp4_gemm_i8", ablob=PTR, wblob=PTR, C=PTR, ldc=I32, M=I32, N=I32, K=I32, ntile=I32,
                            nwt=I32)
GEMM_CV = runtime.Signature("mxfp4_gemm_cv", ablob=PTR, Wsc=PTR, ldsc=I32, W=PTR, C=PTR, ldc=I32, M=I32, N=I32, K=I32,
                            ntile=I32, nwt=I32)

_GROUPED = dict(offsets=PTR, off64=I32, E=I32)
PREP_GROUPED = runtime.Signature(PREP.name + "_grouped", **dict(zip(PREP.names, PREP.kinds)), **_GROUPED)
GEMM_CV_GROUPED = runtime.Signature(GEMM_CV.name + "_grouped", **dict(zip(GEMM_CV.names, GEMM_CV.kinds)), **_GROUPED,
                                    w_stride=runtime.Param.I64, s_stride=runtime.Param.I64)

PREP_THREADS = 256
"""Threads of a prep CTA (PREP_THREADS in csrc/wgmma_blob.cuh, exported as mxfp4_wgmma_prep_threads)."""


def geometry(params: WgmmaParams, m: int, n: int, k: int) -> dict[str, int]:
    """Sizes of the workspace and the grids for C [m, n] = A [m, k] W [n, k]^T."""
    nseg = -(-(k // 32) // SEGMENT_BLOCKS)
    ntile = -(-m // params.tn)
    nwt = -(-n // 128)
    ablob = nseg * ntile * params.ablob_bytes
    # the int8 weight comes from the prep; mxfp4_gemm_cv converts the weight's codes itself
    w_ctas = nwt * nseg if params.int8_weight else 0
    return dict(nseg=nseg, ntile=ntile, nwt=nwt, ablob=ablob, wblob=w_ctas * params.wblob_bytes,
                a_ctas=nseg * ntile * (params.tn // (PREP_THREADS // 32)), w_ctas=w_ctas)


class WgmmaLaunch(Launch):
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, K]) x W^T: the prep (A's token
    tiles, and the weight's tiles for ``params.int8_weight``), then ``mxfp4_gemm_i8`` (the weight as
    int8 from the workspace) or ``mxfp4_gemm_cv`` (the weight's codes and scale bytes as stored, by
    bulk copies; K split over clusters of ``params.split``), a CTA per tn tokens x 128 weight rows."""

    __slots__ = ("geometry",)

    @staticmethod
    def key(params: WgmmaParams, m: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
        return params, -(-m // params.tn), n, k, dtype, index  # M enters through its token tiles

    def __init__(self, params: WgmmaParams, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> None:
        defines, smem = a_defines(params.defines(), dtype), params.smem_bytes()
        prep = runtime.kernel(params.source, PREP, defines, device)
        if not params.int8_weight:
            runtime.prefer_shared(prep)
        gemm = runtime.kernel(params.source, GEMM_I8 if params.int8_weight else GEMM_CV, defines, device, smem)
        g = self.geometry = geometry(params, m, n, k)
        super().__init__(params, device, n, k, (prep, gemm),
                         (runtime.config((g["a_ctas"] + g["w_ctas"], 1, 1), PREP_THREADS, 0, None),
                          runtime.config((g["ntile"] * g["nwt"], 1, params.split), params.threads, smem,
                                         split_cluster(params.split), dependent=True)), g["ablob"] + g["wblob"])

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a, pa, lda = self.operand(a, self.k)
        m, n, k, device, g = a.shape[0], self.n, self.k, self.device, self.geometry
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params, 8, 16, "a row stride that is a multiple of 8 and a 16-byte aligned start")
        (prep, gemm), (prep_config, gemm_config) = self.kernels, self.configs
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        ablob = ws.data_ptr()
        wblob = ablob + g["ablob"]
        runtime.launch(prep, prep_config, device, pa, lda, m, k, pw, ps, ldsc, n, ablob, wblob, g["ntile"], g["a_ctas"])
        w = (wblob,) if self.params.int8_weight else (ps, ldsc, pw)
        runtime.launch(gemm, gemm_config, device, ablob, *w, pc, ldc, m, n, k, g["ntile"], g["nwt"])
        return out


class GroupedWgmmaLaunch(Launch):
    """out [T, N] bf16 (float32 for the tile's ``out_f32``): row t of quant(a [T, K]) times its expert's
    weight, the experts' weights stacked (expert e's N rows at row e * n_padded), tokens sorted by expert,
    ``offsets`` (int32 / int64 [E], on the device) their cumulative ends: ``mxfp4_wgmma_prep_grouped``
    quantizes A's rows into token tiles of at most tn rows of one expert, then ``mxfp4_gemm_cv_grouped``
    runs a CTA per tile and 128 rows of that expert's weight, both finding a tile's expert from the
    offsets. The grid depends on T and E only (``params.items``): no host read, graph capturable."""

    __slots__ = ("ntile", "nwt", "a_ctas")

    key = staticmethod(grouped_key)

    def __init__(self, params: GroupedWgmmaParams, t: int, e: int, n: int, k: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        tile, defines = params.tile, a_defines(params.defines(), dtype)
        prep = runtime.kernel(params.source, PREP_GROUPED, defines, device)
        runtime.prefer_shared(prep)
        gemm = runtime.kernel(params.source, GEMM_CV_GROUPED, defines, device, tile.smem_bytes())
        nseg = -(-(k // 32) // SEGMENT_BLOCKS)
        self.ntile, self.nwt = params.items(t, e), -(-n // 128)
        self.a_ctas = nseg * self.ntile * (tile.tn // (PREP_THREADS // 32))
        super().__init__(params, device, n, k, (prep, gemm),
                         (runtime.config((self.a_ctas, 1, 1), PREP_THREADS, 0, None),
                          runtime.config((self.ntile * self.nwt, 1, 1), tile.threads, tile.smem_bytes(), None,
                                         dependent=True)), params.workspace_bytes(t, e, k))

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
                 out: torch.Tensor, num_experts: int, n_padded: int) -> torch.Tensor:
        a, pa, lda = self.operand(a, self.k)
        t, n, k, device = a.shape[0], self.n, self.k, self.device
        pw, ps, ldsc = weight(data, scales)
        pc, ldc = out_rows(out, self.params.tile, 8, 16,
                           "a row stride that is a multiple of 8 and a 16-byte aligned start")
        po, off64 = offsets_arg(offsets)
        (prep, gemm), (prep_config, gemm_config) = self.kernels, self.configs
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        ablob = ws.data_ptr()
        # the prep's wblob (unused: no int8 weight) points just past A's blobs
        runtime.launch(prep, prep_config, device, pa, lda, t, k, pw, ps, ldsc, n, ablob, ablob + self.workspace_bytes,
                       self.ntile, self.a_ctas, po, off64, num_experts)
        runtime.launch(gemm, gemm_config, device, ablob, ps, ldsc, pw, pc, ldc, t, n, k, self.ntile, self.nwt, po,
                       off64, num_experts, n_padded * (k // 2), n_padded * ldsc)
        return out
