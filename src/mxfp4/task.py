"""The competition interface: ``generate_input`` and ``custom_kernel`` with the task's layouts.

``data = (A, B, B_q, B_shuffle, B_scale_sh)``: A [m, k] and B [n, k] bf16 drawn from
``torch.randn`` with a generator seeded by ``seed`` on ``device``; B_q = MXFP4 codes of B [n, k/2]
(plain); B_shuffle = aiter's (16, 16) shuffle of B_q; B_scale_sh = B's e8m0 scales in aiter's
shuffled, padded layout. ``custom_kernel`` returns C [m, n] bf16 from A, B_shuffle and B_scale_sh.
"""
from __future__ import annotations

import torch

from . import layouts, ops
from .formats import BLOCK
from .tensor import Layout, MXFP4Tensor, quantize

TEST_SHAPES = ((8, 2112, 7168, 124), (16, 3072, 1536, 6635), (64, 3072, 1536, 45), (256, 2880, 512, 78))
"""The task's test cases: (m, n, k, seed)."""

BENCHMARK_SHAPES = ((4, 2880, 512, 4565), (16, 2112, 7168, 15), (32, 4096, 512, 457), (32, 2880, 512, 54),
                    (64, 7168, 2048, 687), (256, 3072, 1536, 7856))
"""The task's benchmark cases: (m, n, k, seed); ranked by the geometric mean of their times."""


def generate_input(m: int, n: int, k: int, seed: int, device: str | torch.device = "cuda"):
    """Random task input (A, B, B_q, B_shuffle, B_scale_sh) for an m x n x k problem."""
    for name, v in (("m", m), ("n", n), ("k", k)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if k % 64:
        raise ValueError(f"k must be a multiple of 64 (32-element blocks, two codes a byte), got {k}")
    if n % 16:
        raise ValueError(f"n must be a multiple of 16 for the (16, 16) weight shuffle, got {n}")
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be a cpu or cuda device (the data is drawn there), got {device}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("generate_input: CUDA is not available on this machine; pass device='cpu'")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.randn((m, k), dtype=torch.bfloat16, device=device, generator=gen)
    b = torch.randn((n, k), dtype=torch.bfloat16, device=device, generator=gen)
    bq = quantize(b)
    return a, b, bq.data, layouts.shuffle_weight(bq.data), layouts.shuffle_scales(bq.scales)


_CODE_DTYPES = tuple(d for d in (torch.uint8, getattr(torch, "float4_e2m1fn_x2", None)) if d is not None)
_SCALE_DTYPES = tuple(d for d in (torch.uint8, getattr(torch, "float8_e8m0fnu", None)) if d is not None)


def weight_from_task(b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, k: int) -> MXFP4Tensor:
    """The task's shuffled weight tensors as an :class:`MXFP4Tensor` (no copy)."""
    # every custom_kernel call: each shape is read once, the per-name loop runs only to name a failure
    if not (isinstance(b_shuffle, torch.Tensor) and isinstance(b_scale_sh, torch.Tensor)
            and b_shuffle.dim() == 2 and b_scale_sh.dim() == 2):
        for name, t in (("B_shuffle", b_shuffle), ("B_scale_sh", b_scale_sh)):
            if not isinstance(t, torch.Tensor) or t.dim() != 2:
                raise TypeError(f"{name} must be a 2-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    if b_shuffle.dtype is not torch.uint8:  # the task may hand fp4x2 / e8m0 dtypes: the same bytes
        if b_shuffle.dtype not in _CODE_DTYPES:
            raise TypeError(f"B_shuffle must hold two e2m1 codes a byte (uint8 or float4_e2m1fn_x2), got "
                            f"{b_shuffle.dtype}")
        b_shuffle = b_shuffle.view(torch.uint8)
    if b_scale_sh.dtype is not torch.uint8:
        if b_scale_sh.dtype not in _SCALE_DTYPES:
            raise TypeError(f"B_scale_sh must hold one e8m0 scale a byte (uint8 or float8_e8m0fnu), got "
                            f"{b_scale_sh.dtype}")
        b_scale_sh = b_scale_sh.view(torch.uint8)
    n, half_k = b_shuffle.shape
    if half_k * 2 != k:
        raise ValueError(f"A.shape[1] (k = {k}) must be twice B_shuffle.shape[1] ({half_k} bytes, "
                         "two codes a byte)")
    if b_scale_sh.shape[1] * BLOCK < k:
        raise ValueError(f"B_scale_sh has {b_scale_sh.shape[1]} columns, too few for k = {k}")
    return MXFP4Tensor(b_shuffle, b_scale_sh, (n, k), Layout.AITER_SHUFFLED)


def custom_kernel(data) -> torch.Tensor:
    """C [m, n] bf16 = quant(A) @ dequant(B)^T from A, B_shuffle and B_scale_sh as given; nothing is kept."""
    if not isinstance(data, (tuple, list)) or len(data) != 5:
        raise TypeError("data must be the task's tuple (A, B, B_q, B_shuffle, B_scale_sh), got "
                        f"{type(data).__name__}")
    a, _b, _bq, b_shuffle, b_scale_sh = data
    if not isinstance(a, torch.Tensor) or a.dim() != 2:
        raise ValueError(f"A must be a 2-D tensor [m, k], got {getattr(a, 'shape', type(a).__name__)}")
    return ops.gemm_a4w4(a, weight_from_task(b_shuffle, b_scale_sh, a.shape[1]))
