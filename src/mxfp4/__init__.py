"""mxfp4: exact MXFP4 (OCP microscaling FP4) W4A4 matrix multiplication, CUDA kernels for Hopper.

Public API: quantize / dequantize / prepare, MXFP4Tensor, Layout, ScaleRule, gemm_a4w4; mixture of
experts: ExpertWeights, grouped_gemm_a4w4 (:mod:`mxfp4.moe`); models:
load / save (safetensors checkpoints, :mod:`mxfp4.checkpoint`), quantize_ (:mod:`mxfp4.convert`; the
layers: :mod:`mxfp4.nn`).
"""
from ._version import __version__
from .checkpoint import load, save
from .convert import quantize_
from .formats import ScaleRule
from .moe import ExpertWeights, grouped_gemm_a4w4
from .ops import gemm_a4w4
from .tensor import Layout, MXFP4Tensor, dequantize, prepare, quantize

__all__ = ["ScaleRule", "Layout", "MXFP4Tensor", "quantize", "dequantize", "prepare", "gemm_a4w4",
           "ExpertWeights", "grouped_gemm_a4w4", "load", "save", "quantize_", "__version__"]
