"""GPT-OSS MXFP4 experts (OpenAI's format): ``*_blocks`` uint8 [E, N, K/32, 16] and ``*_scales`` uint8
[E, N, K/32] for the MoE experts' projections, the same bytes per expert as this library's plain layout."""
from __future__ import annotations

import pathlib

import torch

from ..formats import BLOCK
from ..tensor import MXFP4Tensor, prepare
from .safetensors import Checkpoint


def load_gptoss_experts(path: str | pathlib.Path | Checkpoint, *, prepared: bool = True,
                        device: str | torch.device = "cpu") -> dict[str, list[MXFP4Tensor]]:
    """Per-expert MXFP4 weights [N, K] of a GPT-OSS checkpoint, keyed by tensor name less ``_blocks``.

    ``<name>_blocks`` uint8 [E, N, K/32, 16] (element 2i of a block in the low nibble) and
    ``<name>_scales`` uint8 [E, N, K/32] (e8m0) hold the same bytes as this library's plain layout;
    one projection is read at a time. ``prepared``: in the kernels' layout (:func:`mxfp4.prepare`).
    """
    ckpt = path if isinstance(path, Checkpoint) else Checkpoint(path)
    qc = ckpt.config.get("quantization_config")
    if qc is not None and qc.get("quant_method") != "mxfp4":
        raise ValueError(f"quantization_config.quant_method: {qc.get('quant_method')!r} is not a GPT-OSS "
                         "checkpoint (must be 'mxfp4')")
    experts = {}
    for name in sorted(n for n in ckpt.tensors if n.endswith("_blocks")):
        base = name[: -len("_blocks")]
        info = ckpt.tensors[name]
        if info.dtype != "U8" or len(info.shape) != 4 or info.shape[3] != 16:
            raise ValueError(f"checkpoint tensor {name!r} is {info.dtype} {list(info.shape)}, must be uint8 "
                             "[E, N, K/32, 16] (GPT-OSS MXFP4 blocks)")
        e, n, groups, _ = info.shape
        ckpt.check(f"{base}_scales", ("U8",), (e, n, groups), "GPT-OSS MXFP4 scales: uint8 [E, N, K/32]")
        data = ckpt.tensor(name).to(device).reshape(e, n, groups * 16)
        scales = ckpt.tensor(f"{base}_scales").to(device)
        weights = [MXFP4Tensor(data[i], scales[i], (n, groups * BLOCK)) for i in range(e)]
        experts[base] = [prepare(w) for w in weights] if prepared else weights
    if not experts:
        raise ValueError(f"checkpoint {str(ckpt.path)!r} has no '*_blocks' tensor (GPT-OSS MXFP4 experts)")
    return experts


__all__ = ["load_gptoss_experts"]
