"""``quantize_``: a model's layers to MXFP4, from their own weights (:func:`mxfp4.nn.swap_layers`) or from a
Quark checkpoint (:func:`mxfp4.checkpoint.loader.load_into`). It sits above both, so that nn, the checkpoint
package and the tensor-parallel layers import one way (nn -> checkpoint / distributed -> convert)."""
from __future__ import annotations

import pathlib
from typing import Callable

from torch import nn

from .checkpoint import Checkpoint, load
from .checkpoint.loader import load_into
from .distributed import TensorParallel
from .formats import ScaleRule
from .nn import swap_layers


def quantize_(model: nn.Module, filter_fn: Callable[[nn.Module, str], bool] | None = None, *,
              checkpoint: "str | pathlib.Path | Checkpoint | None" = None, scale_rule: ScaleRule = ScaleRule.AITER,
              device=None, strict: bool = True, tp: TensorParallel | None = None) -> nn.Module:
    """Swaps ``nn.Linear`` layers of ``model`` for :class:`mxfp4.nn.MXFP4Linear` and experts modules for
    :class:`mxfp4.moe.MXFP4Experts` in place; returns ``model``.

    Without ``checkpoint``: the layers ``filter_fn(module, name)`` selects (default
    :func:`mxfp4.nn.default_filter`) are quantized from their own weights (:func:`mxfp4.nn.swap_layers`);
    each keeps its module's dtype, and a layer reachable under several names is swapped under all of them.
    With ``checkpoint`` (a directory or :class:`mxfp4.checkpoint.Checkpoint`, Quark W4A4 MXFP4, or a GPT-OSS
    MXFP4 export): its ``quantization_config`` decides which layers are MXFP4 (the others stay the model's
    own, their weights read as stored and cast to the model's float dtype); every tensor of the model comes
    from the checkpoint, one at a time, onto ``device`` (default: where the model is; CPU for a model on the
    meta device). The model may be built on the meta device: its weights are then created from the
    checkpoint only, and buffers checkpoints do not hold (rotary frequencies) are computed as the model
    defines them, in the dtype the model holds them in. ``strict``: a checkpoint tensor the model has no
    place for (e.g. DeepSeek's MTP layer) is an error; ``strict=False`` skips them with a logged note.
    Everything is checked before anything changes: on an error (naming the tensor or the layer and the
    rule) the model is as it was. ``tp`` (with ``checkpoint``; a :class:`mxfp4.distributed.TensorParallel`):
    the MXFP4 layers its rules name become this rank's column- or row-parallel shards, and only those
    bytes of the weight and its scales are read from the files. See :mod:`mxfp4.checkpoint.loader`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if checkpoint is None:
        if tp is not None:
            raise TypeError("tp= goes with checkpoint= (each rank reads its shard of the checkpoint)")
        if device is not None:
            raise TypeError("device= goes with checkpoint= (quantizing in place keeps each layer where it is)")
        return swap_layers(model, filter_fn, scale_rule)
    if filter_fn is not None:
        raise TypeError("pass filter_fn or checkpoint, not both: a checkpoint's quantization_config decides "
                        "which layers are MXFP4")
    if scale_rule is not ScaleRule.AITER:
        raise TypeError("scale_rule= goes without checkpoint= (the checkpoint's quantization_config says how "
                        "the activations are quantized)")
    if not isinstance(checkpoint, (str, pathlib.Path, Checkpoint)):
        raise TypeError(f"checkpoint must be a directory (str or pathlib.Path) or a mxfp4.checkpoint.Checkpoint, "
                        f"got {type(checkpoint).__name__}")
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load(checkpoint)
    return load_into(model, ckpt, device=device, strict=strict, tp=tp)


__all__ = ["quantize_"]
