"""mxfp4: exact MXFP4 (OCP microscaling FP4) W4A4 matrix multiplication, CUDA kernels for Hopper.

Public API: quantize / dequantize / prepare, MXFP4Tensor, Layout, ScaleRule, gemm_a4w4.
"""
from .formats import ScaleRule
from .ops import gemm_a4w4
from .tensor import Layout, MXFP4Tensor, dequantize, prepare, quantize

__version__ = "0.2.0"

__all__ = ["ScaleRule", "Layout", "MXFP4Tensor", "quantize", "dequantize", "prepare", "gemm_a4w4",
           "__version__"]
