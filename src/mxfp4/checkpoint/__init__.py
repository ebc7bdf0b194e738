"""Safetensors checkpoints of MXFP4 weights: AMD Quark W4A4 MXFP4 (read and write), GPT-OSS experts (read).

Quark W4A4 MXFP4, per quantized linear layer ``<prefix>``: ``<prefix>.weight`` uint8 [N, K/2]
(two e2m1 codes a byte, element 2i in the low nibble, as :func:`mxfp4.formats.pack_codes`),
``<prefix>.weight_scale`` uint8 [N, K/32] (e8m0, bias 127), ``<prefix>.bias`` as it is; the
activations are quantized per call, per 1x32 block. ``config.json``'s ``quantization_config``
says which layers are quantized and how (:func:`quark_config`); a config this library does not run
exactly is refused with a ValueError naming the field.

- ``safetensors.py``: the directory (index, shards, headers checked field by field), tensors read
  one at a time without a memory map; the streamed, sharded writer.
- ``quark.py``: the ``quantization_config`` rules (vLLM's and SGLang's), and the block written.
- ``loader.py``: a checkpoint into a model built on any device, meta included (``mxfp4.quantize_``).
  ``load_plan.py``: what it checks and decides before the model is touched.
- ``save.py``: :func:`save`. ``gptoss.py``: GPT-OSS MXFP4 experts (``quantize_`` loads GPT-OSS checkpoints
  too: experts as :class:`mxfp4.moe.MXFP4Experts`, the rest as the model's own layers).
"""
from .gptoss import GptOssProjection, load_gptoss_experts
from .quark import LayerKind, LayerRule, QuarkConfig, export_config, quark_config
from .safetensors import Checkpoint, TensorInfo, load
from .save import save

__all__ = ["Checkpoint", "TensorInfo", "load", "save", "QuarkConfig", "LayerKind", "LayerRule", "quark_config",
           "export_config", "GptOssProjection", "load_gptoss_experts"]
