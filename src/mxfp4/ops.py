"""Public GEMM op: validation, config choice, dispatch between the Triton kernel (launched by
:mod:`mxfp4.launch`) and the reference; the torch.library op."""
from __future__ import annotations

import torch

from . import reference
from .fold import Folded
from .formats import ScaleRule
from .launch import launch_a4w4
from .residency import device_facts, interpreter_enabled, num_programs_cap
from .tensor import Layout, MXFP4Tensor
from .tuning import KernelConfig, TableCache, TunedTable, choose_config

BACKENDS = ("auto", "triton", "reference")


def triton_available() -> bool:
    """True when triton imports (the kernels need it; the reference path does not)."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


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


_TABLES = TableCache()


def resolve_config(m: int, n: int, k: int, device: torch.device, table: TunedTable | None = None
                   ) -> KernelConfig:
    """The config a call takes: ``table`` if given, else the shipped table of this GPU model
    (exact shape, then M bucket), else the heuristic."""
    if table is None and device.type == "cuda":
        import triton

        table = _TABLES.for_device(device_facts(device)[0], triton.__version__)
    return choose_config(m, n, k, table, num_programs_cap(device) if device.type == "cuda" else 132)


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None = None, *,
              backend: str = "auto", config: KernelConfig | None = None,
              table: TunedTable | None = None) -> torch.Tensor:
    """C = dequant(quant(a)) @ dequant(w)^T in bf16, ``a`` quantized per 1x32 with w's scale rule.

    a: bf16 (or fp16 / fp32) [..., K]. w: MXFP4 weight [N, K], plain or aiter-shuffled layout.
    Returns bf16 [..., N] (written into ``out`` when given). On CUDA with triton this is one
    kernel launch, or two where the config is the int8 path (which also folds ``w`` into int8
    on its first call and caches that on ``w.data``); elsewhere it runs the reference
    (:func:`mxfp4.reference.gemm_a4w4`).
    ``config`` forces a kernel config; else ``table`` (a :class:`mxfp4.tuning.TunedTable`), else
    the table shipped for this GPU, else a heuristic picks it. Nothing is timed on this path.
    """
    m, n, k = validate_gemm_args(a, w, out)
    if config is not None and not isinstance(config, KernelConfig):
        raise TypeError(f"config must be a KernelConfig, got {type(config).__name__}")
    if table is not None and not isinstance(table, TunedTable):
        raise TypeError(f"table must be a TunedTable, got {type(table).__name__}")
    chosen = select_backend(a, backend)
    if chosen == "reference":
        result = reference.gemm_a4w4(a, w, scale_rule=w.scale_rule)
        if out is None:
            return result
        out.copy_(result)
        return out
    if not a.is_cuda and not interpreter_enabled():
        raise ValueError("backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for the CPU interpreter); "
                         f"a is on {a.device}")
    if out is None:
        out = torch.empty((*a.shape[:-1], n), dtype=torch.bfloat16, device=a.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()  # an empty sum; nothing to launch
    a2 = a.reshape(m, k)
    launch_a4w4(a2, w, out.view(m, n), config or resolve_config(m, n, k, a.device, table))
    return out


def gemm_a4w4_debug(a: torch.Tensor, w: MXFP4Tensor, config: KernelConfig | None = None
                    ) -> tuple[torch.Tensor, MXFP4Tensor | Folded]:
    """The Triton kernel's output and the A it quantized, read back from the launch's buffers:
    an MXFP4 tensor (persistent and direct kernels), or the folded A the int8 kernel multiplied.

    For tests: the first must be bit-identical to :func:`mxfp4.quantize`, the second to
    :func:`mxfp4.fold.fold_tensor` of it. The output starts as NaN, so an element the kernel
    leaves unwritten shows.
    """
    m, n, k = validate_gemm_args(a, w, None)
    a2 = a.reshape(m, k)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=a.device)
    quantized = launch_a4w4(a2, w, out, config or resolve_config(m, n, k, a.device), debug=True)
    if isinstance(quantized, Folded):
        return out.reshape(*a.shape[:-1], n), quantized
    fp8, scales = quantized
    codes = ((fp8 >> 2) & 0x7) | ((fp8 >> 4) & 0x8)  # e4m3 byte s<<7 | eem<<2 back to the nibble
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    scale_bytes = ((scales.view(torch.int32) >> 23) & 0xFF).to(torch.uint8)
    return out.reshape(*a.shape[:-1], n), MXFP4Tensor(packed, scale_bytes, (m, k), Layout.PLAIN, w.scale_rule)


# ---- torch.library registration: torch.compile traces through it, CUDA graphs capture it -------

@torch.library.custom_op("mxfp4::gemm_a4w4", mutates_args=())
def _gemm_a4w4_op(a: torch.Tensor, w_data: torch.Tensor, w_scales: torch.Tensor, n: int, k: int,
                  shuffled: bool, floor_rule: bool) -> torch.Tensor:
    w = MXFP4Tensor(w_data, w_scales, (n, k), Layout.AITER_SHUFFLED if shuffled else Layout.PLAIN,
                    ScaleRule.FLOOR if floor_rule else ScaleRule.AITER)
    return gemm_a4w4(a, w)


@_gemm_a4w4_op.register_fake
def _(a, w_data, w_scales, n, k, shuffled, floor_rule):
    return a.new_empty((*a.shape[:-1], n), dtype=torch.bfloat16)


def gemm_a4w4_op(a: torch.Tensor, w: MXFP4Tensor) -> torch.Tensor:
    """:func:`gemm_a4w4` as the registered op ``torch.ops.mxfp4.gemm_a4w4`` (for torch.compile)."""
    validate_gemm_args(a, w, None)
    return _gemm_a4w4_op(a, w.data, w.scales, w.shape[0], w.shape[1], w.layout is Layout.AITER_SHUFFLED,
                         w.scale_rule is ScaleRule.FLOOR)
