"""MXFP4Linear: a drop-in ``nn.Linear`` whose weight is MXFP4 and whose input is quantized per call."""
from __future__ import annotations

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


__all__ = ["MXFP4Linear", "Layout"]
