"""The CUDA backend's entry points: argument checks that the kernels rely on, and the launches."""
from __future__ import annotations

import torch

from .. import plan
from . import runtime
from .runtime import i32

_QUANT_THREADS = 256


def gemm_a4w4(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
              params: plan.GemmParams) -> torch.Tensor:
    """out [M, N] bf16 = quant(a [M, K] bf16) x W^T, W in aiter's shuffled layouts (data, scales).

    Two launches on the current stream: A quantized into a workspace allocated for this call, then
    the GEMM as its programmatic dependent (it streams the weight while the first one runs). The
    caller has validated shapes, dtypes and devices (``mxfp4.ops``); this checks what the bulk
    copies need: 16-byte aligned rows.
    """
    m, k = a.shape
    n = data.shape[0]
    _check_rows(a)
    if not (data.is_contiguous() and scales.is_contiguous() and data.data_ptr() % 16 == 0
            and scales.data_ptr() % 16 == 0):
        raise ValueError("the weight's data and scales must be contiguous and 16-byte aligned")
    if out.stride(1) != 1:
        raise ValueError("out must have unit stride along N")
    nblk, mp = k // 32, -(-m // 4) * 4
    aq = torch.empty(nblk * m * 32, dtype=torch.uint8, device=a.device)
    ash = torch.empty(nblk * mp, dtype=torch.float32, device=a.device)
    kq = runtime.kernel("gemm_a4w4.cu", "mxfp4_quantize_a", params.defines(), a.device)
    items = m * (k // 8)
    runtime.launch(kq, a.device, (-(-items // _QUANT_THREADS), 1, 1), _QUANT_THREADS, 0, None, False,
                   a.data_ptr(), i32(a.stride(0)), aq.data_ptr(), ash.data_ptr(), i32(m), i32(k))
    smem = params.smem_bytes()
    kg = runtime.kernel("gemm_a4w4.cu", "mxfp4_gemm_a4w4", params.defines(), a.device, smem)
    grid = (-(-n // params.bn), -(-m // params.bm), params.split)
    runtime.launch(kg, a.device, grid, params.threads, smem, (1, 1, params.split), True,
                   aq.data_ptr(), ash.data_ptr(), data.data_ptr(), scales.data_ptr(), i32(scales.shape[1]),
                   out.data_ptr(), i32(out.stride(0)), i32(m), i32(n), i32(k))
    return out


def _check_rows(a: torch.Tensor) -> None:
    if a.stride(1) != 1 or a.stride(0) % 8 or a.data_ptr() % 16:
        raise ValueError("a must have unit stride along K, a row stride that is a multiple of 8 and a "
                         "16-byte aligned start")


def quantize(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed codes [M, K/2] and e8m0 scales [M, K/32] of bf16 a [M, K] (plain layout)."""
    m, k = a.shape
    _check_rows(a)
    codes = torch.empty((m, k // 2), dtype=torch.uint8, device=a.device)
    scales = torch.empty((m, k // 32), dtype=torch.uint8, device=a.device)
    if m:
        k_ = runtime.kernel("quantize.cu", "mxfp4_quantize", None, a.device)
        items = m * (k // 8)
        runtime.launch(k_, a.device, (-(-items // _QUANT_THREADS), 1, 1), _QUANT_THREADS, 0, None, False,
                       a.data_ptr(), i32(a.stride(0)), codes.data_ptr(), scales.data_ptr(), i32(m), i32(k))
    return codes, scales
