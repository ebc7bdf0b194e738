"""MXFP4Linear: a drop-in ``nn.Linear`` whose weight is MXFP4 and whose input is quantized per call;
``swap_layers``: a model's ``nn.Linear`` layers (and experts modules) swapped for it, from their own weights
(``mxfp4.quantize_`` calls it; loading from a checkpoint is :mod:`mxfp4.checkpoint.loader`'s)."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from . import moe
from .formats import BLOCK, ScaleRule
from .moe import MXFP4Experts
from .ops import gemm_a4w4, gemm_a4w4_op
from .tensor import LAYER_DTYPES, Layout, MXFP4Tensor, applied_dtype, prepare, quantize


class MXFP4Linear(nn.Module):
    """y = quant(x) @ dequant(W)^T (+ bias), with W stored as MXFP4 and nothing else; the bias is added
    before the one rounding (``round_bf16(exact + bias)``, as Quark's ``x @ W^T + b``; :func:`mxfp4.gemm_a4w4`).

    The layer has a dtype (``dtype``, bf16 unless given; ``.half()``, ``.float()``, ``.to(dtype)``
    change it, and :func:`quantize_` gives each layer its model's): its output and bias are in it,
    whatever the input's float dtype (x is quantized from its values).

    The weight lives in two buffers (``weight_data``, ``weight_scales``), prepared once at
    construction in the kernels' layout (aiter's shuffled layouts, padded to N % 16 == 0 and
    K % 64 == 0 where needed), so ``state_dict`` round-trips and ``.to()`` moves it. Build one with
    :meth:`from_linear` (quantizes a float weight) or :meth:`from_mxfp4` (an already quantized
    weight, e.g. an aiter-prepared checkpoint).
    """

    def __init__(self, weight: MXFP4Tensor, bias: torch.Tensor | None = None, *,
                 dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        if dtype not in LAYER_DTYPES:
            raise TypeError(f"dtype must be torch.bfloat16, float16 or float32, got {dtype!r}")
        self.dtype = dtype
        if not isinstance(weight, MXFP4Tensor) or len(weight.shape) != 2:
            raise TypeError("weight must be a 2-D MXFP4Tensor [out_features, in_features]")
        self.out_features, self.in_features = weight.shape
        weight = prepare(weight)
        self.layout = weight.layout
        self.scale_rule = weight.scale_rule
        self.register_buffer("weight_data", weight.data)
        self.register_buffer("weight_scales", weight.scales)
        self._weight = weight
        if bias is not None:
            if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (self.out_features,):
                raise ValueError(f"bias must be a tensor of shape ({self.out_features},), got "
                                 f"{getattr(bias, 'shape', type(bias).__name__)}")
            self.bias = nn.Parameter(bias.detach().to(dtype), requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_mxfp4(cls, weight: MXFP4Tensor, bias: torch.Tensor | None = None, *,
                   dtype: torch.dtype = torch.bfloat16) -> "MXFP4Linear":
        return cls(weight, bias, dtype=dtype)

    @classmethod
    def from_linear(cls, linear: nn.Linear, scale_rule: ScaleRule = ScaleRule.AITER, *,
                    dtype: torch.dtype = torch.bfloat16) -> "MXFP4Linear":
        """Quantize ``linear.weight`` to MXFP4 (``linear.in_features`` must be a multiple of 32); the
        layer's dtype is ``dtype`` (:func:`quantize_` passes the linear's own)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, got {type(linear).__name__}")
        if linear.in_features % BLOCK:
            raise ValueError(f"linear.in_features ({linear.in_features}) must be a multiple of {BLOCK} "
                             "(one e8m0 scale per 32 inputs)")
        w = quantize(linear.weight.detach(), scale_rule)
        bias = linear.bias.detach() if linear.bias is not None else None
        return cls(w, bias, dtype=dtype)

    @property
    def weight(self) -> MXFP4Tensor:
        """The weight as an MXFP4Tensor over the two buffers (built again only when they change:
        its checks took 5 us a call)."""
        w = self._weight
        data, scales = self._buffers["weight_data"], self._buffers["weight_scales"]
        if w is None or w.data is not data or w.scales is not scales:
            w = self._weight = MXFP4Tensor(data, scales, (self.out_features, self.in_features), self.layout,
                                           self.scale_rule)
        return w

    def _apply(self, fn, recurse=True):
        # the dtype follows what fn does to a float tensor (.half(), .float(), .to(dtype); a move keeps it);
        # float64 and the rest are refused here, before anything changes
        dtype = applied_dtype(fn, self.dtype, "MXFP4Linear")
        self._weight = None  # .to() / .cuda() replace the buffers: let the old ones go
        self.dtype = dtype
        return super()._apply(fn, recurse)

    def kept_bytes(self) -> int:
        """Bytes this layer keeps for its weight: the MXFP4 codes and scale bytes, nothing more."""
        return self.weight_data.numel() + self.weight_scales.numel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # eager calls skip the dispatcher (7 us of the op's Python kernel and autograd wrapper);
        # torch.compile traces the op, and gemm_a4w4 takes the op itself when x requires grad
        w = self.weight
        bias = self._parameters["bias"]  # not self.bias: nn.Module.__getattr__'s lookup, twice
        if torch.compiler.is_compiling():
            y = gemm_a4w4_op(x, w, self.dtype, bias)
        else:
            y = gemm_a4w4(x, w, out_dtype=self.dtype, bias=bias)
        if self.out_features % 16:
            y = y.contiguous()  # a layer's output is dense, as nn.Linear's
        return y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, dtype={self.dtype}, layout={self.layout.name}, "
                f"scale_rule={self.scale_rule.name}")


def default_filter(module: nn.Module, name: str) -> bool:
    """The layers :func:`quantize_` swaps by default: every ``nn.Linear`` with in_features % 32 == 0
    (one scale per 32 inputs; any shape runs on the kernels), except the output head (a module named
    ``lm_head``), which models keep in full precision (as Quark's exports do); and every experts module
    :func:`mxfp4.moe.experts_layout` knows whose hidden and intermediate sizes are multiples of 32."""
    if isinstance(module, nn.Linear):
        return name.rsplit(".", 1)[-1] != "lm_head" and module.in_features % BLOCK == 0
    layout = moe.experts_layout(module)
    return layout is not None and layout.hidden_size % BLOCK == 0 and layout.intermediate_size % BLOCK == 0


def swap_layers(model: nn.Module, filter_fn: Callable[[nn.Module, str], bool] | None = None,
                scale_rule: ScaleRule = ScaleRule.AITER) -> nn.Module:
    """Swaps the ``nn.Linear`` layers of ``model`` that ``filter_fn(module, name)`` selects (default
    :func:`default_filter`) for :class:`MXFP4Linear` in place, each quantized from its own weight and keeping
    its dtype; returns ``model`` (``mxfp4.quantize_(model, filter_fn)`` calls it).

    Experts modules (:func:`mxfp4.moe.experts_layout`: transformers' fused DeepSeek-V3, Qwen2-MoE, Qwen3-MoE
    and GPT-OSS experts, or a ``ModuleList`` of gate / up / down MLPs) the filter selects become one
    MXFP4Experts each, before the linear layers (so per-expert linears go with their experts). A module
    reachable under several names (``m.b = m.a``) is one layer: it is swapped under every name, to one new
    module, and a filter that selects some of its names but not all is an error. Everything is checked
    before anything changes.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, nn.Linear):
        raise TypeError("model is itself an nn.Linear: use MXFP4Linear.from_linear(model)")
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(f"filter_fn must be a callable (module, name) -> bool, got {type(filter_fn).__name__}")
    if not isinstance(scale_rule, ScaleRule):
        raise TypeError(f"scale_rule must be a ScaleRule, got {scale_rule!r}")
    keep = filter_fn or default_filter
    experts = _selected(model, lambda m: moe.experts_layout(m) is not None, keep, ())
    for names, m in experts:
        layout = moe.experts_layout(m)
        if layout.hidden_size % BLOCK or layout.intermediate_size % BLOCK:
            raise ValueError(f"experts {names[0]!r}: hidden ({layout.hidden_size}) and intermediate "
                             f"({layout.intermediate_size}) sizes must be multiples of {BLOCK}")
    inside = tuple(f"{name}." for names, _ in experts for name in names)
    chosen = _selected(model, lambda m: isinstance(m, nn.Linear), keep, inside)
    for names, m in chosen:
        if m.in_features % BLOCK:
            raise ValueError(f"layer {names[0]!r}: in_features ({m.in_features}) must be a multiple of {BLOCK} "
                             "(one e8m0 scale per 32 inputs)")
        if m.weight.dtype not in LAYER_DTYPES:
            raise ValueError(f"layer {names[0]!r} is {m.weight.dtype}: an MXFP4Linear's dtype is bfloat16, float16 "
                             "or float32 (cast the model first)")
    while experts:
        names, m = experts.pop(0)
        new = moe.from_module(m, scale_rule)
        for name in names:
            _set_module(model, name, new)
        del m
    while chosen:  # each bf16 weight is released as soon as its layer is swapped
        names, m = chosen.pop(0)
        new = MXFP4Linear.from_linear(m, scale_rule, dtype=m.weight.dtype)
        for name in names:
            _set_module(model, name, new)
        del m
    return model


def _selected(model: nn.Module, kind: Callable[[nn.Module], bool], keep: Callable[[nn.Module, str], bool],
              inside: tuple[str, ...]) -> list[tuple[list[str], nn.Module]]:
    """(every name, module) of each distinct module of ``kind`` that ``keep`` selects outside ``inside``."""
    found: dict[int, tuple[nn.Module, list[str]]] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if name and kind(m):
            found.setdefault(id(m), (m, []))[1].append(name)
    chosen = []
    for m, names in found.values():
        picked = [name for name in names if not name.startswith(inside) and keep(m, name)]
        if picked and len(picked) != len(names):
            left = next(name for name in names if name not in picked)
            why = "lies inside swapped experts" if left.startswith(inside) else "filter_fn does not select"
            raise ValueError(f"layer {picked[0]!r} is also the model's {left!r} (one module, two names), which {why}: "
                             "a shared layer is swapped under all its names or none")
        if picked:
            chosen.append((names, m))
    return chosen


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


__all__ = ["MXFP4Linear", "MXFP4Experts", "Layout", "swap_layers", "default_filter"]
