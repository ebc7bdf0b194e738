"""One launch object a GEMM family, in one module a kernel source: for a parameter set and a shape it
holds the kernels (compiled and loaded once), their launch configurations and the call's workspace
bytes, and it builds each kernel's arguments in the order of the kernel's ``runtime.Signature``
(tests/test_launch.py checks every shipped launch against its kernel's compiled prototype).

``small``: ``gemm_small.cu`` (``SmallParams``); ``decode``: ``gemm_decode.cu`` (``DecodeParams``) and ``stream``:
``gemm_stream.cu`` (``StreamParams``), each after ``quantize.cu``'s token quantizer (``token_quantizer``), and the
streaming GEMM grouped over a mixture of experts' rows after its grouped quantizer (``GroupedStreamParams``);
``band``: ``gemm_band.cu`` after ``quantize.cu``'s band quantizer (``BandParams``); ``wgmma``: ``gemm_wgmma.cu``
(``WgmmaParams``, and grouped over a mixture of experts' rows: ``GroupedWgmmaParams``). :mod:`mxfp4.cuda.ops`
looks a launch up per shape and calls it.

Every family reads A of each dtype of ``A_KINDS`` as it is: the kernel that quantizes A (the GEMM's own
module, or ``quantize.cu`` for the decode, grouped and streaming GEMMs) is built with that dtype's
``A_KIND`` define.

Here too: what the kernels' loads and stores need of the tensors a launch is handed. Each tensor
attribute is read once: a read costs 0.2-0.4 us of Python (CPU), and a call made about 30 of them.
"""
from __future__ import annotations

import torch

from .. import runtime

A_KINDS = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
"""The activations' dtypes the kernels read, each kernel that quantizes A built for one (its ``A_KIND``)."""

_P = runtime.Param
TOKEN_QUANT = runtime.Signature("mxfp4_quantize_tokens", A=_P.PTR, lda=_P.I32, M=_P.I32, Ka=_P.I32, K=_P.I32,
                                as8=_P.PTR, sa=_P.PTR, rows=_P.I32, tiles=_P.I32,
                                flags=_P.PTR, nflags=_P.I32)


def a_defines(defines: dict[str, int] | None, dtype: torch.dtype) -> dict[str, int] | None:
    """``defines`` of a module that quantizes A, for A of ``dtype``: bf16 adds nothing (its build as it was)."""
    kind = A_KINDS[dtype]
    return {**(defines or {}), "A_KIND": kind} if kind else defines


def token_quantizer(dtype: torch.dtype, device: torch.device):
    """``quantize.cu``'s ``mxfp4_quantize_tokens`` for A of ``dtype``: A's token rows into the layout the decode and
    grouped GEMMs read (``tiles`` 1: int8 values [K/32][rows][32], float32 half-scales [K/32][rows]) or the
    streaming GEMM's (``tiles`` its token tiles: each lane's values and half-scales of every tile adjacent),
    and a GEMM's fix-up flags zeroed; the GEMM is its programmatic dependent."""
    return runtime.kernel("quantize.cu", TOKEN_QUANT, a_defines(None, dtype), device)


def token_quantizer_config(rows_: int, k: int, flags: int = 0):
    """One thread a quarter block of ``rows_`` token rows, and at least one a flag to zero."""
    return runtime.config((-(-max(rows_ * (k // 32) * 4, flags) // 256), 1, 1), 256, 0, None)


class Launch:
    """A family's launch for one parameter set, a weight of ``n`` rows and ``k`` columns on ``device``, and
    the part of A's shape it depends on (``key``): its ``kernels`` and their ``configs`` in launch order,
    and the ``workspace_bytes`` a call allocates (freed with it). Called with A [M, K], the weight's
    codes and scales (aiter's shuffled layouts) and C, it makes A what its kernels read (``operand``),
    checks what their loads need and launches them on the current stream, the arguments in each
    kernel's signature's order."""

    QUANTIZES_A = True
    """Whether a kernel of the family's own module quantizes A (a build of it a dtype of A); else
    ``quantize.cu``'s quantizer does."""

    __slots__ = ("params", "device", "n", "k", "kernels", "configs", "workspace_bytes")

    def __init__(self, params, device: torch.device, n: int, k: int, kernels: tuple, configs: tuple,
                 workspace_bytes: int) -> None:
        self.params, self.device, self.n, self.k = params, device, n, k
        self.kernels, self.configs, self.workspace_bytes = kernels, configs, workspace_bytes

    @staticmethod
    def key(params, m: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
        """The launch's key for a call of A [m, K] of ``dtype`` and a weight of n rows and k columns on
        device ``index``: ``params``, the part of the shape the launch depends on, A's dtype (its kernels'
        builds), ``index`` (one launch is built a key)."""
        raise NotImplementedError

    @classmethod
    def operand(cls, a: torch.Tensor, k64: int) -> tuple[torch.Tensor, int, int]:
        """(A, its address, its row stride): 2-D ``a`` [M, K] as the kernel that quantizes A takes it, its dtype,
        rows it can load (else a copy); for a kernel in the GEMM's module, K padded with zero blocks to the
        weight's K64 (quantize.cu's quantizers read A's K and write those zero blocks themselves); as
        :func:`rows_for_kernel`."""
        if cls.QUANTIZES_A and k64 != a.shape[1]:  # zero blocks, as the weight's padding (one copy of A)
            a = torch.nn.functional.pad(a, (0, k64 - a.shape[1]))
        return rows_for_kernel(a)

    def __call__(self, a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def grouped_key(params, t: int, e: int, n: int, k: int, dtype: torch.dtype, index: int) -> tuple:
    """A grouped launch's key (``Launch.key`` of both grouped families) for T rows over E experts of [n, k]: all of
    it (the grid and the workspace depend on T and E, the kernels' builds on A's dtype)."""
    return params, t, e, n, k, dtype, index


def split_cluster(split: int) -> tuple[int, int, int] | None:
    """The cluster of a launch whose K is split over ``split`` CTAs; none (no launch attribute) for one
    CTA: every kernel reads its cluster's size and rank, which a launch without clusters gives as 1 and 0."""
    return (1, 1, split) if split > 1 else None


def row_layout(a: torch.Tensor) -> tuple[int, int, bool]:
    """(address, row stride, whether the kernels read ``a`` [M, K]'s rows: unit stride along K, a row
    stride that is a multiple of 8 and a 16-byte aligned start). A single row's stride is never read:
    its row stride is K."""
    (m, k), (s0, s1) = a.shape, a.stride()
    ptr = a.data_ptr()
    lda = s0 if m > 1 else k
    return ptr, lda, s1 == 1 and lda % 8 == 0 and ptr % 16 == 0


def rows_ok(a: torch.Tensor) -> bool:
    return row_layout(a)[2]


def rows_for_kernel(a: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """(``a`` [M, K] itself when the kernels can read its rows, else a copy in new storage (unit stride, aligned);
    its address; its row stride), its layout read once. The caller keeps the tensor until its launch is queued."""
    ptr, lda, ok = row_layout(a)
    if ok:
        return a, ptr, lda
    a = a.clone(memory_format=torch.contiguous_format)
    return (a, *rows(a))  # the copy's rows, checked: K a multiple of 8


def rows(a: torch.Tensor) -> tuple[int, int]:
    """(address, row stride) of ``a`` [M, K] for a kernel, after checking the kernels can read its rows."""
    ptr, lda, ok = row_layout(a)
    if not ok:
        raise ValueError("a must have unit stride along K, a row stride that is a multiple of 8 and a "
                         "16-byte aligned start")
    return ptr, lda


def weight(data: torch.Tensor, scales: torch.Tensor) -> tuple[int, int, int]:
    """(codes' address, scales' address, scale row length) of a weight in aiter's shuffled layouts,
    after checking both are contiguous and 16-byte aligned."""
    pw, ps = data.data_ptr(), scales.data_ptr()
    if pw % 16 or ps % 16 or not (data.is_contiguous() and scales.is_contiguous()):
        raise ValueError("the weight's data and scales must be contiguous and 16-byte aligned")
    return pw, ps, scales.shape[1]


def offsets_arg(offsets: torch.Tensor) -> tuple[int, int]:
    """(address, off64) of a grouped call's ``offsets``, after checking they are contiguous int32 or int64."""
    if not offsets.is_contiguous() or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError("offsets must be contiguous int32 or int64")
    return offsets.data_ptr(), 1 if offsets.dtype is torch.int64 else 0


def out_rows(out: torch.Tensor, params, stride: int, align: int, rule: str) -> tuple[int, int]:
    """(address, row stride) of ``out`` after checking the dtype ``params`` writes (float32 for its
    ``out_f32`` variants, else bf16), unit stride along N, a row stride that is a multiple of
    ``stride`` and an ``align``-byte aligned start (``rule`` says so in the error)."""
    want = torch.float32 if params.out_f32 else torch.bfloat16
    if out.dtype is not want:
        raise ValueError(f"out must be {want} for {params} (it writes {want}), got {out.dtype}")
    (s0, s1), ptr = out.stride(), out.data_ptr()
    if s1 != 1 or s0 % stride or ptr % align:
        raise ValueError("out must have unit stride along N" + (f", {rule}" if rule else ""))
    return ptr, s0
