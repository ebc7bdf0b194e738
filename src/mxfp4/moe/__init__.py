"""Mixture of experts: the experts' MXFP4 weights stacked in one prepared tensor with the grouped GEMM
over tokens sorted by expert (:mod:`.grouped`), and the experts module that replaces a transformers
model's experts, with the layouts it reads (:mod:`.experts`)."""
from .experts import (FUSED, Accumulation, Activation, Expert, ExpertsLayout, MXFP4Experts, accumulation_of,
                      activation_args, experts_layout, from_module, join_gate_up, split_gate_up)
from .grouped import ROW_TILE, ExpertWeights, check_offsets, grouped_gemm_a4w4, padded_rows

__all__ = ["FUSED", "ROW_TILE", "Accumulation", "Activation", "Expert", "ExpertWeights", "ExpertsLayout", "MXFP4Experts",
           "accumulation_of", "activation_args", "check_offsets", "experts_layout", "from_module", "grouped_gemm_a4w4",
           "join_gate_up", "padded_rows", "split_gate_up"]
