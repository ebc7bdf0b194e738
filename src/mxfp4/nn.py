"""MXFP4Linear: a drop-in ``nn.Linear`` whose weight is MXFP4 and whose input is quantized per call;
``quantize_``: swaps a model's ``nn.Linear`` layers for it, from their weights or from a checkpoint."""
from __future__ import annotations

import pathlib
from typing import Callable

import torch
from torch import nn

from . import moe
from .formats import BLOCK, ScaleRule
from .moe import MXFP4Experts
from .ops import gemm_a4w4, gemm_a4w4_op
from .tensor import Layout, MXFP4Tensor, prepare, quantize


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
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
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
        self._weight = None  # .to() / .cuda() replace the buffers: let the old ones go
        # the dtype follows what fn does to a float tensor (.half(), .float(), .to(dtype); a move keeps it)
        self.dtype = fn(torch.empty(0, dtype=self.dtype)).dtype
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


def quantize_(model: nn.Module, filter_fn: Callable[[nn.Module, str], bool] | None = None, *,
              checkpoint: "str | pathlib.Path | None" = None, scale_rule: ScaleRule = ScaleRule.AITER,
              device: "str | torch.device | None" = None, strict: bool = True, tp=None) -> nn.Module:
    """Swaps ``nn.Linear`` layers of ``model`` for :class:`MXFP4Linear` and experts modules for
    :class:`mxfp4.moe.MXFP4Experts` in place; returns ``model``.

    Without ``checkpoint``: the layers ``filter_fn(module, name)`` selects (default
    :func:`default_filter`) are quantized from their own weights; each keeps its module's dtype. Experts
    modules (:func:`mxfp4.moe.experts_layout`: transformers' fused DeepSeek-V3, Qwen2-MoE, Qwen3-MoE and
    GPT-OSS experts, or a ``ModuleList`` of gate / up / down MLPs) the filter selects become one
    MXFP4Experts each, before the linear layers (so per-expert linears go with their experts).
    With ``checkpoint`` (a directory or :class:`mxfp4.checkpoint.Checkpoint`, Quark W4A4 MXFP4):
    its ``quantization_config`` decides which layers are MXFP4 (the others stay the model's own,
    their weights read as stored and cast to the model's float dtype); every tensor of the model
    comes from the checkpoint, one at a time, onto ``device`` (default: where the model is; CPU for a
    model on the meta device). The model may be built on the meta device: its weights are then
    created from the checkpoint only, and buffers checkpoints do not hold (rotary frequencies) are
    computed as the model defines them. ``strict``: a checkpoint tensor the model has no place for
    (e.g. DeepSeek's MTP layer) is an error; ``strict=False`` skips them with a logged note.
    Everything is checked before anything changes: on an error (naming the tensor or the layer and
    the rule) the model is as it was. See :mod:`mxfp4.checkpoint.loader`.

    Experts modules load from a checkpoint as one MXFP4Experts each: from Quark's per-expert layers
    ``<experts>.<e>.gate_proj`` / ``up_proj`` / ``down_proj`` (``.weight``, ``.weight_scale``, ``.bias``),
    or, from a GPT-OSS checkpoint (``quant_method`` "mxfp4"), ``<experts>.gate_up_proj_blocks`` /
    ``_scales`` / ``_bias`` and ``down_proj_*``, whose other linear layers stay the model's own.

    ``tp`` (with ``checkpoint``; a :class:`mxfp4.distributed.TensorParallel`): the MXFP4 layers its
    rules name become this rank's :class:`~mxfp4.distributed.ColumnParallelMXFP4Linear` (rows
    ``shard_range(N)`` of the weight) or :class:`~mxfp4.distributed.RowParallelMXFP4Linear` (inputs
    ``shard_range(K)``), and only those bytes of the weight and its scales are read from the files;
    the other layers and tensors load whole.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, nn.Linear):
        raise TypeError("model is itself an nn.Linear: use MXFP4Linear.from_linear(model)")
    if checkpoint is None:
        if tp is not None:
            raise TypeError("tp= goes with checkpoint= (each rank reads its shard of the checkpoint)")
        if device is not None:
            raise TypeError("device= goes with checkpoint= (quantizing in place keeps each layer where it is)")
        keep = filter_fn or default_filter
        experts = [(name, m) for name, m in model.named_modules()
                   if moe.experts_layout(m) is not None and keep(m, name)]
        for name, m in experts:
            layout = moe.experts_layout(m)
            if layout.hidden_size % BLOCK or layout.intermediate_size % BLOCK:
                raise ValueError(f"experts {name!r}: hidden ({layout.hidden_size}) and intermediate "
                                 f"({layout.intermediate_size}) sizes must be multiples of {BLOCK}")
        inside = tuple(f"{name}." for name, _ in experts)
        chosen = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear) and keep(m, name)
                  and not name.startswith(inside)]
        for name, m in chosen:
            if m.in_features % BLOCK:
                raise ValueError(f"layer {name!r}: in_features ({m.in_features}) must be a multiple of {BLOCK} "
                                 "(one e8m0 scale per 32 inputs)")
        while experts:
            name, m = experts.pop(0)
            _set_module(model, name, moe.from_module(m, scale_rule))
            del m
        while chosen:  # each bf16 weight is released as soon as its layer is swapped
            name, m = chosen.pop(0)
            _set_module(model, name, MXFP4Linear.from_linear(m, scale_rule, dtype=m.weight.dtype))
            del m
        return model
    if filter_fn is not None:
        raise TypeError("pass filter_fn or checkpoint, not both: a checkpoint's quantization_config decides "
                        "which layers are MXFP4")
    from . import checkpoint as ckpt_mod  # checkpoint builds on this module; imported when used
    from .checkpoint.loader import load_into

    ckpt = checkpoint if isinstance(checkpoint, ckpt_mod.Checkpoint) else ckpt_mod.load(checkpoint)
    return load_into(model, ckpt, device=device, strict=strict, tp=tp)


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


__all__ = ["MXFP4Linear", "MXFP4Experts", "Layout", "quantize_", "default_filter"]
