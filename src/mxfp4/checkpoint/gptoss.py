"""GPT-OSS MXFP4 experts (OpenAI's format): ``*_blocks`` uint8 [E, N, K/32, 16] and ``*_scales`` uint8
[E, N, K/32] for the MoE experts' projections, the same bytes per expert as this library's plain layout,
and ``*_bias`` [E, N] beside them. ``gate_up_proj``'s N = 2I rows interleave the gate (row 2j) and the
up projection (row 2j + 1) of output j, which GPT-OSS's clamped SwiGLU takes apart
(:class:`mxfp4.moe.Activation`)."""
from __future__ import annotations

import dataclasses
import pathlib

import torch

from ..formats import BLOCK
from ..moe import ExpertWeights
from ..tensor import MXFP4Tensor
from .safetensors import FLOAT_DTYPES, Checkpoint


@dataclasses.dataclass(frozen=True)
class GptOssProjection:
    """One experts projection of a GPT-OSS checkpoint: every expert's weight [N, K] stacked and prepared,
    and the biases [E, N] (None where the checkpoint has no ``*_bias``)."""

    weights: ExpertWeights
    bias: torch.Tensor | None


def load_gptoss_experts(path: str | pathlib.Path | Checkpoint, *,
                        device: str | torch.device = "cpu") -> dict[str, GptOssProjection]:
    """The MXFP4 experts projections of a GPT-OSS checkpoint, keyed by tensor name less ``_blocks``.

    ``<name>_blocks`` uint8 [E, N, K/32, 16] (element 2i of a block in the low nibble) and
    ``<name>_scales`` uint8 [E, N, K/32] (e8m0) hold the same bytes as this library's plain layout;
    ``<name>_bias`` [E, N] is read as stored. One projection is read at a time. To run a GPT-OSS model,
    ``mxfp4.quantize_(model, checkpoint=path)`` builds its :class:`mxfp4.moe.MXFP4Experts` from these.
    """
    ckpt = path if isinstance(path, Checkpoint) else Checkpoint(path)
    qc = ckpt.config.get("quantization_config")
    if qc is not None and not isinstance(qc, dict):
        raise ValueError(f"{ckpt.path / 'config.json'}: quantization_config {qc!r} must be an object")
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
        bias = None
        if f"{base}_bias" in ckpt:
            ckpt.check(f"{base}_bias", FLOAT_DTYPES, (e, n), "GPT-OSS experts bias: float [E, N]")
            bias = ckpt.tensor(f"{base}_bias").to(device)
        data = ckpt.tensor(name).to(device).reshape(e, n, groups * 16)
        scales = ckpt.tensor(f"{base}_scales").to(device)
        weights = ExpertWeights.stack([MXFP4Tensor(data[i], scales[i], (n, groups * BLOCK)) for i in range(e)])
        experts[base] = GptOssProjection(weights, bias)
    if not experts:
        raise ValueError(f"checkpoint {str(ckpt.path)!r} has no '*_blocks' tensor (GPT-OSS MXFP4 experts)")
    return experts


__all__ = ["GptOssProjection", "load_gptoss_experts"]
