"""Checkpoints in the layout AMD publishes its Quark MXFP4 exports in, written without mxfp4.save.

The safetensors files are written by hand here (8-byte header length, JSON header, raw bytes), the
shards named and indexed as Hugging Face exports are, and ``quantization_config`` is the block of
the published Llama MXFP4 exports (amd/Llama-3.1-405B-Instruct-MXFP4, -3.3-70B-): W4A4 MXFP4
global specs with every metadata field they carry, FP8 per-tensor KV cache through
``layer_quant_config`` entries ``*k_proj`` / ``*v_proj`` named in ``export.kv_cache_group``, and
``<k_proj>.output_scale`` / ``<v_proj>.output_scale`` float32 scalars. Norms are stored in float32
(as some exports keep them).
"""
from __future__ import annotations

import copy
import json
import pathlib
import struct

import torch

import mxfp4

_NAMES = {torch.uint8: "U8", torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16",
          torch.int64: "I64", torch.int32: "I32"}
_MX = {"dtype": "fp4", "qscheme": "per_group", "ch_axis": -1, "group_size": 32, "block_size": None,
       "symmetric": None, "round_method": "half_even", "scale_type": "float", "scale_format": "e8m0",
       "scale_calculation_mode": "even", "mx_element_dtype": None, "observer_cls": "PerBlockMXObserver",
       "is_scale_quant": False}
_FP8_KV = {"dtype": "fp8_e4m3", "is_dynamic": False, "qscheme": "per_tensor", "ch_axis": None, "group_size": None,
           "block_size": None, "symmetric": True, "round_method": "half_even", "scale_type": "float",
           "scale_format": None, "scale_calculation_mode": None, "mx_element_dtype": None,
           "observer_cls": "PerTensorMinMaxObserver", "is_scale_quant": False}
_LAYER = {"weight": {**_MX, "is_dynamic": False}, "input_tensors": {**_MX, "is_dynamic": True},
          "output_tensors": None, "bias": None, "target_device": None}
PUBLISHED = {
    "algo_config": None, "exclude": ["lm_head"],
    "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "min_kv_scale": 0.0, "pack_method": "reorder",
               "weight_format": "real_quantized", "weight_merge_groups": None},
    "global_quant_config": _LAYER,
    "layer_quant_config": {"*k_proj": {**_LAYER, "output_tensors": _FP8_KV},
                           "*v_proj": {**_LAYER, "output_tensors": _FP8_KV}},
    "layer_type_quant_config": {}, "kv_cache_quant_config": {}, "quant_method": "quark", "quant_mode": "eager_mode",
    "softmax_quant_spec": None, "version": "0.9",
}
"""The quantization_config of the published Llama MXFP4 exports (fields and values as they carry them)."""


def write_safetensors(file: pathlib.Path, tensors: dict[str, torch.Tensor]) -> None:
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, t in tensors.items():
        blob = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    file.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_checkpoint(path: pathlib.Path, tensors: dict[str, torch.Tensor], config: dict, shards: int = 2) -> None:
    """``tensors`` in ``shards`` files (in order, split evenly by count) with an index, and ``config.json``."""
    path.mkdir(parents=True, exist_ok=True)
    names = list(tensors)
    per = -(-len(names) // shards)
    weight_map = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i * per:(i + 1) * per]}
        write_safetensors(path / file, part)
        weight_map.update({n: file for n in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    (path / "config.json").write_text(json.dumps(config, indent=2, default=str))


def kv_scale(name: str) -> float:
    """The FP8 KV-cache scale written for ``name`` (distinct per layer, so a mix-up shows)."""
    return 0.0625 + 0.001 * sum(map(ord, name)) % 1.0


def export(model: torch.nn.Module, path: pathlib.Path, *, shards: int = 2, extra: dict | None = None,
           quantization_config: dict | None = None) -> pathlib.Path:
    """``model`` (bf16, real weights) exported as AMD's Quark W4A4 MXFP4 exports are: every linear layer but
    ``lm_head`` as uint8 codes / e8m0 scales (mxfp4.quantize's bytes, the in-memory model's), biases bf16,
    FP8 KV scales for k_proj / v_proj, norms in float32, tied weights once; ``extra`` tensors added."""
    qc = copy.deepcopy(quantization_config or PUBLISHED)
    state = model.state_dict()
    tensors, seen = {}, set()
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"}
    for key, t in state.items():
        owner, _, attr = key.rpartition(".")
        if owner in linears and attr == "weight":
            w = mxfp4.quantize(t)
            tensors[key] = w.data
            tensors[f"{owner}.weight_scale"] = w.scales
            if owner.rsplit(".", 1)[-1] in ("k_proj", "v_proj"):
                tensors[f"{owner}.output_scale"] = torch.tensor(kv_scale(owner), dtype=torch.float32)
            continue
        ident = (t.untyped_storage().data_ptr(), t.storage_offset())
        if ident in seen:
            continue  # tied (lm_head to embed_tokens): stored once, under the first name
        seen.add(ident)
        tensors[key] = t.float() if "norm" in key else t
    tensors.update(extra or {})
    write_checkpoint(path, tensors, {**model.config.to_dict(), "quantization_config": qc}, shards)
    return path
