"""Public GEMM op: validation, dispatch between the Triton kernel and the reference, launch."""
from __future__ import annotations

import os

import torch

from . import reference
from .formats import ScaleRule
from .tensor import Layout, MXFP4Tensor
from .tuning import KernelConfig, heuristic_config

BACKENDS = ("auto", "triton", "reference")


def triton_available() -> bool:
    """True when triton imports (the kernels need it; the reference path does not)."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def interpreter_enabled() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def select_backend(a: torch.Tensor, backend: str = "auto") -> str:
    """Which backend a call on ``a`` takes: 'triton' on CUDA with triton, else 'reference'."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    return "triton" if a.is_cuda and triton_available() else "reference"


def validate_gemm_args(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None) -> tuple[int, int, int]:
    """Check the operands of :func:`gemm_a4w4`; returns (M, N, K)."""
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"a must be a torch.Tensor, got {type(a).__name__}")
    if not isinstance(w, MXFP4Tensor):
        raise TypeError(f"w must be an MXFP4Tensor (see mxfp4.quantize), got {type(w).__name__}")
    if a.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"a must be bfloat16, float16 or float32, got {a.dtype}")
    if a.dim() < 1:
        raise ValueError("a must have shape [..., K], got a scalar")
    if len(w.shape) != 2:
        raise ValueError(f"w must be a 2-D weight [N, K], got logical shape {w.shape}")
    n, k = w.shape
    if a.shape[-1] != k:
        raise ValueError(f"a.shape[-1] (K = {a.shape[-1]}) must equal w's K ({k})")
    if a.device != w.device:
        raise ValueError(f"a ({a.device}) and w ({w.device}) must be on the same device")
    m = a.numel() // k if k else int(torch.Size(a.shape[:-1]).numel())
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        want = (*a.shape[:-1], n)
        if tuple(out.shape) != want or out.dtype != torch.bfloat16:
            raise ValueError(f"out must be bfloat16 of shape {want}, got {out.dtype} {tuple(out.shape)}")
        if out.device != a.device:
            raise ValueError(f"out ({out.device}) must be on a's device ({a.device})")
        if not out.is_contiguous():
            raise ValueError("out must be contiguous")
    return m, n, k


class _Workspace:
    """Split-K tile counters, zero between launches (the last program of a tile resets its counter)."""

    def __init__(self) -> None:
        self._counters: dict[tuple, torch.Tensor] = {}

    def counters(self, device: torch.device, count: int) -> torch.Tensor:
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        key = (device.type, device.index, stream)
        buf = self._counters.get(key)
        if buf is None or buf.numel() < count:
            buf = torch.zeros(max(count, 4096), dtype=torch.int32, device=device)
            self._counters[key] = buf
        return buf


_WORKSPACE = _Workspace()


def launch_a4w4(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, config: KernelConfig,
                debug: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    """Launch the Triton kernel on 2-D a [M, K] into out [M, N]; no validation here."""
    import triton

    from .kernels.a4w4 import a4w4_kernel

    m, k = a2.shape
    n = w.shape[0]
    shuffled = w.layout is Layout.AITER_SHUFFLED
    scols = w.scales.shape[1]
    chunks = triton.cdiv(k, config.block_k)
    split_k = max(1, min(config.split_k, chunks))
    per_split = triton.cdiv(chunks, split_k)
    split_k = triton.cdiv(chunks, per_split)
    grid = (triton.cdiv(n, config.block_n), triton.cdiv(m, config.block_m), split_k)
    tiles = grid[0] * grid[1]
    if split_k > 1:
        part = torch.empty(tiles * split_k * config.block_m * config.block_n, dtype=torch.float32,
                           device=a2.device)
        cnt = _WORKSPACE.counters(a2.device, tiles)
    else:
        part = cnt = out2
    dbg_q, dbg_s = debug if debug is not None else (out2, out2)
    a4w4_kernel[grid](
        a2, a2.stride(0), a2.stride(1),
        w.data, w.scales,
        out2, out2.stride(0), out2.stride(1),
        part, cnt, dbg_q, dbg_s,
        m, n, k, scols,
        SHUFFLED=shuffled, FLOOR_RULE=w.scale_rule is ScaleRule.FLOOR,
        BM=config.block_m, BN=config.block_n, BK=config.block_k,
        SPLIT_K=split_k, CHUNKS_PER_SPLIT=per_split, USE_SPLIT=split_k > 1, NUM_STAGES=config.num_stages,
        DEBUG_A=debug is not None,
        num_warps=config.num_warps,
    )


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None = None, *,
              backend: str = "auto", config: KernelConfig | None = None) -> torch.Tensor:
    """C = dequant(quant(a)) @ dequant(w)^T in bf16, ``a`` quantized per 1x32 with w's scale rule.

    a: bf16 (or fp16 / fp32) [..., K]. w: MXFP4 weight [N, K], plain or aiter-shuffled layout.
    Returns bf16 [..., N] (written into ``out`` when given). On CUDA with triton this is one
    kernel launch; elsewhere it runs the reference (:func:`mxfp4.reference.gemm_a4w4`).
    """
    m, n, k = validate_gemm_args(a, w, out)
    if config is not None and not isinstance(config, KernelConfig):
        raise TypeError(f"config must be a KernelConfig, got {type(config).__name__}")
    chosen = select_backend(a, backend)
    if chosen == "reference":
        result = reference.gemm_a4w4(a, w, scale_rule=w.scale_rule)
        if out is None:
            return result
        out.copy_(result)
        return out
    if out is None:
        out = torch.empty((*a.shape[:-1], n), dtype=torch.bfloat16, device=a.device)
    if m == 0 or n == 0:
        return out
    a2 = a.reshape(m, k)
    launch_a4w4(a2, w, out.view(m, n), config or heuristic_config(m, n, k))
    return out


def gemm_a4w4_debug(a: torch.Tensor, w: MXFP4Tensor, config: KernelConfig | None = None
                    ) -> tuple[torch.Tensor, MXFP4Tensor]:
    """The Triton kernel's output and the MXFP4 A it quantized in registers (plain layout).

    For tests: the quantized A must be bit-identical to :func:`mxfp4.quantize`.
    """
    m, n, k = validate_gemm_args(a, w, None)
    a2 = a.reshape(m, k)
    out = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    q = torch.full((m, k // 2), 0xEE, dtype=torch.uint8, device=a.device)
    s = torch.full((m, k // 32), 0xEE, dtype=torch.uint8, device=a.device)
    launch_a4w4(a2, w, out, config or heuristic_config(m, n, k), debug=(q, s))
    return out.reshape(*a.shape[:-1], n), MXFP4Tensor(q, s, (m, k), Layout.PLAIN, w.scale_rule)
