"""mxfp4: exact MXFP4 (OCP microscaling FP4) W4A4 matrix multiplication.

Public API: quantize / dequantize, MXFP4Tensor, Layout, ScaleRule, gemm_a4w4, KernelConfig.
"""
from .formats import ScaleRule
from .ops import gemm_a4w4
from .tensor import Layout, MXFP4Tensor, dequantize, quantize
from .tuning import KernelConfig

__version__ = "0.1.0"

__all__ = ["ScaleRule", "Layout", "MXFP4Tensor", "quantize", "dequantize", "gemm_a4w4", "KernelConfig",
           "__version__"]
