"""The public GEMM: argument checks, backend choice, dispatch, and the torch op with its fake."""
from __future__ import annotations

import functools
import warnings

import torch

from . import plan, reference
from .formats import ScaleRule
from .tensor import Layout, MXFP4Tensor

BACKENDS = ("auto", "cuda", "reference")


@functools.lru_cache(maxsize=None)
def _device_facts(index: int) -> tuple[tuple[int, int], int]:
    props = torch.cuda.get_device_properties(index)
    return (props.major, props.minor), props.multi_processor_count


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return plan.load_table()


def cuda_supported(device: torch.device) -> bool:
    """True when the CUDA kernels run on ``device`` (a Hopper GPU, compute capability 9.0)."""
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _device_facts(index)[0] == (9, 0)


def validate(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None) -> tuple[int, int, int]:
    """Checks the operands of :func:`gemm_a4w4`; returns (M, N, K)."""
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
        for name, t in (("a", a), ("w.data", w.data), ("w.scales", w.scales)):
            if _overlaps(out, t):
                raise ValueError(f"out must not overlap {name} (the kernel reads {name} while it writes out)")
    return m, n, k


def _overlaps(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.numel() == 0 or y.numel() == 0:
        return False
    if x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr():
        return False
    x0, y0 = x.data_ptr(), y.data_ptr()
    x1 = x0 + sum((s - 1) * st for s, st in zip(x.shape, x.stride())) * x.element_size() + x.element_size()
    y1 = y0 + sum((s - 1) * st for s, st in zip(y.shape, y.stride())) * y.element_size() + y.element_size()
    return x0 < y1 and y0 < x1


def select_backend(a: torch.Tensor, w: MXFP4Tensor, backend: str = "auto") -> str:
    """Which backend a call takes. 'auto': the CUDA kernels on a Hopper GPU, the reference elsewhere."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "reference":
        return backend
    if backend == "auto" and not cuda_supported(a.device):
        if a.is_cuda:
            _warn_once(f"mxfp4: no CUDA kernel for {torch.cuda.get_device_name(a.device)} (Hopper, sm_90, "
                       "only); running the exact reference, which is slow")
        return "reference"
    if not cuda_supported(a.device):
        raise ValueError(f"backend='cuda' needs a Hopper GPU (sm_90); a is on {a.device}")
    unsupported = _kernel_rule_broken(a, w)
    if unsupported is None:
        return "cuda"
    if backend == "auto":
        _warn_once(f"mxfp4: {unsupported}; running the exact reference, which is slow")
        return "reference"
    raise ValueError(unsupported)


def _kernel_rule_broken(a: torch.Tensor, w: MXFP4Tensor) -> str | None:
    """The first rule of the CUDA kernels that the operands break (None: they take them)."""
    if a.dtype != torch.bfloat16:
        return f"the CUDA kernels take bfloat16 activations, got {a.dtype} (cast a, or pass backend='reference')"
    if w.layout is not Layout.AITER_SHUFFLED:
        return ("the CUDA kernels read the weight in aiter's shuffled layout: prepare it once with "
                "mxfp4.prepare(w) (N % 16 == 0 and K % 64 == 0)")
    if w.scale_rule is not ScaleRule.AITER:
        return f"the CUDA kernels quantize A with ScaleRule.AITER; w uses {w.scale_rule.name} (pass backend='reference')"
    return None


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def params_for(problem: plan.Problem, device: torch.device) -> plan.GemmParams | plan.WgmmaParams:
    """The kernel parameters a call of shape ``problem`` on ``device`` gets (``plan.choose``)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return plan.choose(problem, _table(), _device_facts(index)[1])


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None = None, *, backend: str = "auto",
              params: plan.GemmParams | plan.WgmmaParams | None = None) -> torch.Tensor:
    """C = dequant(quant(a)) @ dequant(w)^T, bf16 [..., N]; ``a`` [..., K] quantized per 1x32 block.

    On a Hopper GPU: the CUDA kernels (one launch up to 32 rows, two from 33), which read ``w`` as
    stored (aiter's shuffled layout, see :func:`mxfp4.prepare`) and keep nothing between calls. Elsewhere the exact
    reference. ``params`` forces a kernel variant (``GemmParams``: the small-M kernel, ``WgmmaParams``:
    the large-M kernel); by default ``plan.choose`` picks.
    """
    m, n, k = validate(a, w, out)
    if params is not None and not isinstance(params, (plan.GemmParams, plan.WgmmaParams)):
        raise TypeError(f"params must be a mxfp4.plan.GemmParams or WgmmaParams, got {type(params).__name__}")
    chosen = select_backend(a, w, backend)
    if chosen == "reference":
        result = reference.gemm_a4w4(a, w, scale_rule=w.scale_rule)
        if out is None:
            return result
        return out.copy_(result)
    if out is None:
        out = torch.empty((*a.shape[:-1], n), dtype=torch.bfloat16, device=a.device)
    if m == 0 or n == 0:
        return out
    from .cuda import ops as cuda_ops

    a2 = cuda_ops.rows_for_kernel(a.reshape(m, k))
    problem = plan.Problem(m, n, k)
    if params is None:
        params = params_for(problem, a.device)
    else:
        params.check()
        if not params.fits(problem):
            raise ValueError(f"params.split ({params.split}) must be at most K / 32 ({k // 32})")
    if isinstance(params, plan.WgmmaParams):
        cuda_ops.gemm_a4w4_wgmma(a2, w.data, w.scales, out.view(m, n), params)
    else:
        cuda_ops.gemm_a4w4(a2, w.data, w.scales, out.view(m, n), params)
    return out


# ---- torch.library: torch.compile sees one opaque op; CUDA graphs capture its launch -------------

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
    """:func:`gemm_a4w4` through the registered op ``torch.ops.mxfp4.gemm_a4w4`` (torch.compile)."""
    validate(a, w, None)
    return _gemm_a4w4_op(a, w.data, w.scales, w.shape[0], w.shape[1], w.layout is Layout.AITER_SHUFFLED,
                         w.scale_rule is ScaleRule.FLOOR)
