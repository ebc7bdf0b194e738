"""MXFP4Linear: a drop-in ``nn.Linear`` whose weight is MXFP4 and whose input is quantized per call."""
from __future__ import annotations

import torch
from torch import nn

from .formats import ScaleRule
from .ops import gemm_a4w4_op
from .tensor import Layout, MXFP4Tensor, quantize


class MXFP4Linear(nn.Module):
    """y = quant(x) @ dequant(W)^T (+ bias), bf16 out, with W stored as MXFP4.

    The weight lives in two buffers (``weight_data``, ``weight_scales``; aiter's shuffled layout
    when N % 16 == 0 and K % 64 == 0, else plain), so ``state_dict`` round-trips and ``.to()``
    moves it. Build one with :meth:`from_linear` (quantizes a float weight) or
    :meth:`from_mxfp4` (an already quantized weight, e.g. an aiter-prepared checkpoint).
    """

    def __init__(self, weight: MXFP4Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        if not isinstance(weight, MXFP4Tensor) or len(weight.shape) != 2:
            raise TypeError("weight must be a 2-D MXFP4Tensor [out_features, in_features]")
        self.out_features, self.in_features = weight.shape
        self.layout = weight.layout
        self.scale_rule = weight.scale_rule
        self.register_buffer("weight_data", weight.data)
        self.register_buffer("weight_scales", weight.scales)
        if bias is not None:
            if bias.shape != (self.out_features,):
                raise ValueError(f"bias must have shape ({self.out_features},), got {tuple(bias.shape)}")
            self.bias = nn.Parameter(bias.to(torch.bfloat16), requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_mxfp4(cls, weight: MXFP4Tensor, bias: torch.Tensor | None = None) -> "MXFP4Linear":
        return cls(weight, bias)

    @classmethod
    def from_linear(cls, linear: nn.Linear, scale_rule: ScaleRule = ScaleRule.AITER) -> "MXFP4Linear":
        """Quantize ``linear.weight`` (in_features % 32 == 0) to MXFP4."""
        w = quantize(linear.weight.detach(), scale_rule)
        n, k = w.shape
        if n % 16 == 0 and k % 64 == 0:
            w = w.to_layout(Layout.AITER_SHUFFLED)
        bias = linear.bias.detach() if linear.bias is not None else None
        return cls(w, bias)

    @property
    def weight(self) -> MXFP4Tensor:
        return MXFP4Tensor(self.weight_data, self.weight_scales, (self.out_features, self.in_features),
                           self.layout, self.scale_rule)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = gemm_a4w4_op(x, self.weight)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, layout={self.layout.name}, scale_rule={self.scale_rule.name}")
