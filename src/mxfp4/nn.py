"""MXFP4Linear: a drop-in ``nn.Linear`` whose weight is MXFP4 and whose input is quantized per call;
``quantize_``: swaps a model's ``nn.Linear`` layers for it, from their weights or from a checkpoint."""
from __future__ import annotations

import pathlib
from typing import Callable

import torch
from torch import nn

from .formats import BLOCK, ScaleRule
from .ops import gemm_a4w4_op
from .tensor import Layout, MXFP4Tensor, prepare, quantize


class MXFP4Linear(nn.Module):
    """y = quant(x) @ dequant(W)^T (+ bias), bf16 out, with W stored as MXFP4 and nothing else.

    The weight lives in two buffers (``weight_data``, ``weight_scales``), prepared once at
    construction in the kernels' layout (aiter's shuffled layouts) when N % 16 == 0 and
    K % 64 == 0, so ``state_dict`` round-trips and ``.to()`` moves it. Build one with
    :meth:`from_linear` (quantizes a float weight) or :meth:`from_mxfp4` (an already quantized
    weight, e.g. an aiter-prepared checkpoint).
    """

    def __init__(self, weight: MXFP4Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        if not isinstance(weight, MXFP4Tensor) or len(weight.shape) != 2:
            raise TypeError("weight must be a 2-D MXFP4Tensor [out_features, in_features]")
        self.out_features, self.in_features = weight.shape
        if self.out_features % 16 == 0 and self.in_features % 64 == 0:
            weight = prepare(weight)
        self.layout = weight.layout
        self.scale_rule = weight.scale_rule
        self.register_buffer("weight_data", weight.data)
        self.register_buffer("weight_scales", weight.scales)
        if bias is not None:
            if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (self.out_features,):
                raise ValueError(f"bias must be a tensor of shape ({self.out_features},), got "
                                 f"{getattr(bias, 'shape', type(bias).__name__)}")
            self.bias = nn.Parameter(bias.detach().to(torch.bfloat16), requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_mxfp4(cls, weight: MXFP4Tensor, bias: torch.Tensor | None = None) -> "MXFP4Linear":
        return cls(weight, bias)

    @classmethod
    def from_linear(cls, linear: nn.Linear, scale_rule: ScaleRule = ScaleRule.AITER) -> "MXFP4Linear":
        """Quantize ``linear.weight`` to MXFP4 (``linear.in_features`` must be a multiple of 32)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, got {type(linear).__name__}")
        if linear.in_features % BLOCK:
            raise ValueError(f"linear.in_features ({linear.in_features}) must be a multiple of {BLOCK} "
                             "(one e8m0 scale per 32 inputs)")
        w = quantize(linear.weight.detach(), scale_rule)
        bias = linear.bias.detach() if linear.bias is not None else None
        return cls(w, bias)

    @property
    def weight(self) -> MXFP4Tensor:
        return MXFP4Tensor(self.weight_data, self.weight_scales, (self.out_features, self.in_features),
                           self.layout, self.scale_rule)

    def kept_bytes(self) -> int:
        """Bytes this layer keeps for its weight: the MXFP4 codes and scale bytes, nothing more."""
        return self.weight_data.numel() + self.weight_scales.numel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = gemm_a4w4_op(x, self.weight)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, layout={self.layout.name}, scale_rule={self.scale_rule.name}")


def default_filter(module: nn.Module, name: str) -> bool:
    """The layers :func:`quantize_` swaps by default: every ``nn.Linear`` whose weight fits the CUDA
    kernels' layout (in_features % 64 == 0, out_features % 16 == 0), except the output head
    (a module named ``lm_head``), which models keep in full precision (as Quark's exports do)."""
    return (isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] != "lm_head"
            and module.in_features % 64 == 0 and module.out_features % 16 == 0)


def quantize_(model: nn.Module, filter_fn: Callable[[nn.Module, str], bool] | None = None, *,
              checkpoint: "str | pathlib.Path | None" = None, scale_rule: ScaleRule = ScaleRule.AITER,
              device: "str | torch.device | None" = None, strict: bool = True) -> nn.Module:
    """Swaps ``nn.Linear`` layers of ``model`` for :class:`MXFP4Linear` in place; returns ``model``.

    Without ``checkpoint``: the layers ``filter_fn(module, name)`` selects (default
    :func:`default_filter`) are quantized from their own weights.
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
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, nn.Linear):
        raise TypeError("model is itself an nn.Linear: use MXFP4Linear.from_linear(model)")
    if checkpoint is None:
        if device is not None:
            raise TypeError("device= goes with checkpoint= (quantizing in place keeps each layer where it is)")
        keep = filter_fn or default_filter
        chosen = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear) and keep(m, name)]
        for name, m in chosen:
            if m.in_features % BLOCK:
                raise ValueError(f"layer {name!r}: in_features ({m.in_features}) must be a multiple of {BLOCK} "
                                 "(one e8m0 scale per 32 inputs)")
        while chosen:  # each bf16 weight is released as soon as its layer is swapped
            name, m = chosen.pop(0)
            _set_module(model, name, MXFP4Linear.from_linear(m, scale_rule))
            del m
        return model
    if filter_fn is not None:
        raise TypeError("pass filter_fn or checkpoint, not both: a checkpoint's quantization_config decides "
                        "which layers are MXFP4")
    from . import checkpoint as ckpt_mod  # checkpoint builds on this module; imported when used
    from .checkpoint.loader import load_into

    ckpt = checkpoint if isinstance(checkpoint, ckpt_mod.Checkpoint) else ckpt_mod.load(checkpoint)
    return load_into(model, ckpt, device=device, strict=strict)


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


__all__ = ["MXFP4Linear", "Layout", "quantize_", "default_filter"]
