"""The argument checks of the public GEMM (:func:`mxfp4.gemm_a4w4`, its op and the grouped GEMM): the
operands, ``out`` (its dtype, shape, device and that it overlaps no input) and ``bias``."""
from __future__ import annotations

import torch

from .tensor import MXFP4Tensor


def validate(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None) -> tuple[int, int, int]:
    """Checks the operands of :func:`gemm_a4w4`; returns (M, N, K)."""
    # every eager call runs this: each tensor attribute is read once (a.shape, the devices)
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"a must be a torch.Tensor, got {type(a).__name__}")
    if not isinstance(w, MXFP4Tensor):
        raise TypeError(f"w must be an MXFP4Tensor (see mxfp4.quantize), got {type(w).__name__}")
    if a.dtype not in _FLOATS:
        raise TypeError(f"a must be bfloat16, float16 or float32, got {a.dtype}")
    shape = a.shape
    if not shape:
        raise ValueError("a must have shape [..., K], got a scalar")
    if len(w.shape) != 2:
        raise ValueError(f"w must be a 2-D weight [N, K], got logical shape {w.shape}")
    n, k = w.shape
    if shape[-1] != k:
        raise ValueError(f"a.shape[-1] (K = {shape[-1]}) must equal w's K ({k})")
    device = a.device
    if device != w.data.device:
        raise ValueError(f"a ({device}) and w ({w.device}) must be on the same device")
    if out is not None:
        _validate_out(out, a, w, shape, n, device)
    return a.numel() // k, n, k


_FLOATS = (torch.bfloat16, torch.float16, torch.float32)


def _validate_out(out: torch.Tensor, a: torch.Tensor, w: MXFP4Tensor, shape: torch.Size, n: int,
                  device: torch.device) -> None:
    """:func:`validate`'s checks of ``out`` (``shape``: a's, ``n``: w's N, ``device``: a's)."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    got = out.shape
    if len(got) != len(shape) or got[-1] != n or got[:-1] != shape[:-1] or out.dtype not in _FLOATS:
        raise ValueError(f"out must be bfloat16, float16 or float32 of shape {(*shape[:-1], n)}, got {out.dtype} "
                         f"{tuple(got)}")
    if out.device != device:
        raise ValueError(f"out ({out.device}) must be on a's device ({device})")
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    if out.requires_grad and torch.is_grad_enabled():
        raise ValueError("out requires grad: gemm_a4w4 writes it in place, which autograd does not record; pass "
                         "out=None (the result then carries a's gradient) or call under torch.no_grad()")
    nbytes = out.nbytes
    if nbytes and device.type != "meta":  # meta tensors have no addresses (every data_ptr is 0)
        start = out.data_ptr()
        end = start + nbytes
        for name, t in (("a", a), ("w.data", w.data), ("w.scales", w.scales)):
            if _overlaps(start, end, t):
                raise ValueError(f"out must not overlap {name} (the kernel reads {name} while it writes out)")


def validate_bias(bias: torch.Tensor, n: int, device: torch.device) -> None:
    """Checks the ``bias`` of :func:`gemm_a4w4`: a bf16, fp16 or float32 tensor [N] on a's device."""
    if not isinstance(bias, torch.Tensor):
        raise TypeError(f"bias must be a torch.Tensor, got {type(bias).__name__}")
    if bias.dtype not in _FLOATS:
        raise TypeError(f"bias must be bfloat16, float16 or float32, got {bias.dtype}")
    if tuple(bias.shape) != (n,):
        raise ValueError(f"bias must have shape ({n},) (w's N), got {tuple(bias.shape)}")
    if bias.device != device:
        raise ValueError(f"bias ({bias.device}) must be on a's device ({device})")


def _overlaps(start: int, end: int, y: torch.Tensor) -> bool:
    """Whether the bytes [start, end) meet those ``y`` spans: address ranges, so no storage lookups."""
    y0 = y.data_ptr()
    if y0 >= end:  # strides are not negative: y lies at y0 and above
        return False
    if y.is_contiguous():
        return start < y0 + y.nbytes and y.numel() > 0
    if y.numel() == 0:
        return False
    span = (sum((s - 1) * st for s, st in zip(y.shape, y.stride())) + 1) * y.element_size()
    return start < y0 + span and y0 < end
