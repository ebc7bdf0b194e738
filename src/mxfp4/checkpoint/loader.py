"""A Quark W4A4 MXFP4 checkpoint into a model, one tensor at a time, onto the device the layers run on.

:func:`load_into` is what ``mxfp4.quantize_(model, checkpoint=...)`` runs. The model may be built on
the meta device (``with torch.device("meta"): AutoModelForCausalLM.from_config(cfg)``): its bf16
weights then never exist. Every header is checked against the model first (a plan, ``load_plan.py``), so a bad
checkpoint leaves the model as it was; then each tensor is read into a host buffer of its own size,
moved to the device and swapped in, and the host buffer freed before the next is read.

Experts modules (:func:`mxfp4.moe.experts_layout`) become :class:`mxfp4.moe.MXFP4Experts`, from Quark's
per-expert layers or from a GPT-OSS checkpoint's ``*_blocks`` / ``*_scales`` / ``*_bias``; one
projection's experts are read, then stacked and prepared on the device (about three times that
projection's MXFP4 bytes at the peak).
"""
from __future__ import annotations

import logging

import torch
from torch import nn

from ..distributed import ColumnParallelMXFP4Linear, RowParallelMXFP4Linear, TensorParallel
from .. import moe
from ..nn import MXFP4Linear
from ..tensor import Layout, MXFP4Tensor
from .load_plan import _Experts, _plan, _projections, _Swap
from .safetensors import Checkpoint

log = logging.getLogger("mxfp4")


def _device_of(model: nn.Module, device) -> torch.device:
    if device is not None:
        return torch.device(device)
    real = {t.device for t in [*model.parameters(), *model.buffers()] if t.device.type != "meta"}
    if len(real) > 1:
        raise ValueError(f"the model's tensors are on {sorted(map(str, real))}: pass device= to say where the "
                         "checkpoint goes")
    return real.pop() if real else torch.device("cpu")


def _experts_module(ckpt: Checkpoint, s: _Experts, target: torch.device) -> moe.MXFP4Experts:
    """The MXFP4Experts that replaces ``s``, its weights read one expert's projection at a time."""
    layout, act = s.layout, s.layout.activation
    e, h, i = layout.num_experts, layout.hidden_size, layout.intermediate_size

    def on_target(w: MXFP4Tensor) -> MXFP4Tensor:
        return MXFP4Tensor(w.data.to(target), w.scales.to(target), w.shape, Layout.PLAIN, w.scale_rule)

    gate_up_bias = down_bias = None
    if s.gptoss:
        stacks = []
        for proj, n, k in (("gate_up_proj", 2 * i, h), ("down_proj", h, i)):
            data = ckpt.tensor(f"{s.name}.{proj}_blocks").to(target).reshape(e, n, k // 2)
            scales = ckpt.tensor(f"{s.name}.{proj}_scales").to(target)
            stacks.append(moe.ExpertWeights.stack([MXFP4Tensor(data[x], scales[x], (n, k)) for x in range(e)]))
            del data, scales
        gate_up, down = stacks
        if layout.bias:
            gate_up_bias = ckpt.tensor(f"{s.name}.gate_up_proj_bias").to(target)
            down_bias = ckpt.tensor(f"{s.name}.down_proj_bias").to(target)
    else:
        gu, dn, gu_bias, dn_bias = [], [], [], []
        for x in range(e):
            gate, up, down_w = (on_target(ckpt.mxfp4_weight(f"{s.name}.{x}.{p}", n, k)) for p, n, k in
                                _projections(layout))
            gu.append(MXFP4Tensor(moe.join_gate_up(gate.data, up.data, act),
                                  moe.join_gate_up(gate.scales, up.scales, act), (2 * i, h)))
            dn.append(down_w)
            if layout.bias:
                gu_bias.append(moe.join_gate_up(*(ckpt.tensor(f"{s.name}.{x}.{p}.bias").to(target)
                                                  for p in ("gate_proj", "up_proj")), act))
                dn_bias.append(ckpt.tensor(f"{s.name}.{x}.down_proj.bias").to(target))
        gate_up, down = moe.ExpertWeights.stack(gu), moe.ExpertWeights.stack(dn)
        if layout.bias:
            gate_up_bias, down_bias = torch.stack(gu_bias), torch.stack(dn_bias)
    return moe.MXFP4Experts(gate_up, down, act, **moe.activation_args(s.module, layout), gate_up_bias=gate_up_bias,
                            down_bias=down_bias, dtype=layout.dtype)


def _assign(refs: list, value: torch.Tensor, old: torch.Tensor) -> None:
    # One object for every name of a tied tensor, as the model had it.
    if isinstance(old, nn.Parameter):
        value = nn.Parameter(value, requires_grad=old.requires_grad)
    for module, attr in refs:
        (module._parameters if attr in module._parameters else module._buffers)[attr] = value


def _rebuild_buffers(module: nn.Module, device: torch.device) -> None:
    # The dtype each buffer had on meta: a model built and then cast (model.to(torch.bfloat16)) casts its
    # float buffers too, and the recomputed ones must be what that model holds.
    dtypes = {b: module._buffers[b].dtype for b in module._non_persistent_buffers_set
              if module._buffers.get(b) is not None}
    if callable(getattr(module, "init_buffers", None)):
        module.init_buffers(device)
    else:
        # Built on the CPU, as the model builds it (and as transformers recomputes it after a meta load),
        # then moved: inv_freq computed on a GPU could differ in the last bit.
        with torch.device("cpu"):
            fresh = type(module)(config=module.config)
        for b in dtypes:
            if fresh._buffers.get(b) is not None:
                module._buffers[b] = fresh._buffers[b]
    for b, dtype in dtypes.items():
        t = module._buffers[b]
        if t.is_meta:
            raise ValueError(f"buffer {b!r} of {type(module).__name__} is still on the meta device after its "
                             "module recomputed its buffers")
        module._buffers[b] = t.to(device, dtype if t.dtype.is_floating_point and dtype.is_floating_point else None)


def _group(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:3]) if len(parts) > 3 and parts[2].isdigit() else parts[0]


def _layer(ckpt: Checkpoint, s: _Swap, target: torch.device, tp: TensorParallel | None) -> nn.Module:
    """The layer that replaces ``s``: an MXFP4Linear, or this rank's shard read alone from the file."""
    span = {"rows": s.span} if s.style == "column" else {"cols": s.span} if s.style == "row" else {}
    w = ckpt.mxfp4_weight(s.name, s.n, s.k, **span)
    w = MXFP4Tensor(w.data.to(target), w.scales.to(target), w.shape, w.layout, w.scale_rule)
    bias = ckpt.tensor(f"{s.name}.bias").to(target) if s.bias else None
    if s.style is None:
        return MXFP4Linear(w, bias, dtype=s.dtype)
    rank, world = tp.place()
    if s.style == "column":
        bias = bias[s.span[0]:s.span[1]] if bias is not None else None
        return ColumnParallelMXFP4Linear(w, bias, out_features=s.n, rank=rank, world_size=world, group=tp.group)
    return RowParallelMXFP4Linear(w, bias, in_features=s.k, rank=rank, world_size=world, group=tp.group)


def load_into(model: nn.Module, ckpt: Checkpoint, *, device=None, strict: bool = True,
              tp: TensorParallel | None = None) -> nn.Module:
    """Loads the Quark W4A4 MXFP4 checkpoint ``ckpt`` into ``model`` (built on any device, meta included);
    see :func:`mxfp4.quantize_`, which calls it. With ``tp`` the layers its rules name become this
    rank's tensor-parallel shards, each read alone from the files. Returns ``model``."""
    if tp is not None and not isinstance(tp, TensorParallel):
        raise TypeError(f"tp must be a mxfp4.distributed.TensorParallel, got {type(tp).__name__}")
    target = _device_of(model, device)
    plan = _plan(model, ckpt, target, strict, tp)
    with torch.no_grad():
        for s in plan.experts:
            parent_name, _, child = s.name.rpartition(".")
            setattr(model.get_submodule(parent_name) if parent_name else model, child, _experts_module(ckpt, s, target))
        for s in plan.swaps:
            parent_name, _, child = s.name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            layer = _layer(ckpt, s, target, tp)
            setattr(parent, child, layer)
            for other in s.aliases:
                other_parent, _, other_child = other.rpartition(".")
                setattr(model.get_submodule(other_parent) if other_parent else model, other_child, layer)
            if s.kv_scale:
                scale = ckpt.tensor(f"{s.name}.output_scale").to(target, torch.float32).reshape(())
                parent.register_buffer(s.kv_scale, scale, persistent=False)
        for fill in plan.fills:
            t = fill.old
            if t.is_meta or t.device != target:
                _assign(fill.refs, ckpt.tensor(fill.key).to(target, t.dtype), t)
            else:
                t.copy_(ckpt.tensor(fill.key))
        for module in plan.rebuild:
            _rebuild_buffers(module, target)
        for module, b in plan.move:
            module._buffers[b] = module._buffers[b].to(target)
    if plan.kv_note:
        log.info(plan.kv_note)
    if plan.unused:
        groups = sorted({_group(n) for n in plan.unused})
        log.warning("checkpoint %r: %d tensors the model has no place for were not loaded (strict=False), under %s",
                    str(ckpt.path), len(plan.unused), ", ".join(groups[:8]) + (" ..." if len(groups) > 8 else ""))
    return model


__all__ = ["load_into"]
