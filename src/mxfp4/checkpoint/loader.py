"""A Quark W4A4 MXFP4 checkpoint into a model, one tensor at a time, onto the device the layers run on.

:func:`load_into` is what ``mxfp4.quantize_(model, checkpoint=...)`` runs. The model may be built on
the meta device (``with torch.device("meta"): AutoModelForCausalLM.from_config(cfg)``): its bf16
weights then never exist. Every header is checked against the model first (a plan), so a bad
checkpoint leaves the model as it was; then each tensor is read into a host buffer of its own size,
moved to the device and swapped in, and the host buffer freed before the next is read.

Experts modules (:func:`mxfp4.moe.experts_layout`) become :class:`mxfp4.moe.MXFP4Experts`, from Quark's
per-expert layers or from a GPT-OSS checkpoint's ``*_blocks`` / ``*_scales`` / ``*_bias``; one
projection's experts are read, then stacked and prepared on the device (about three times that
projection's MXFP4 bytes at the peak).
"""
from __future__ import annotations

import dataclasses
import logging

import torch
from torch import nn

from ..distributed import ColumnParallelMXFP4Linear, RowParallelMXFP4Linear, TensorParallel, shard_range
from .. import moe
from ..formats import BLOCK
from ..nn import MXFP4Linear
from ..tensor import Layout, MXFP4Tensor
from .quark import LayerKind, LayerRule, QuarkConfig, quark_config
from .safetensors import FLOAT_DTYPES, SCALE_DTYPES, Checkpoint

log = logging.getLogger("mxfp4")


@dataclasses.dataclass
class _Swap:  # a linear layer that becomes an MXFP4Linear
    name: str
    n: int
    k: int
    bias: bool
    kv_scale: str | None  # the attribute of the parent that keeps <name>.output_scale
    dtype: torch.dtype  # the linear's: the MXFP4Linear's output and bias dtype (the model's)
    span: tuple[int, int] | None = None  # tensor parallel: this rank's rows (column) or inputs (row)
    style: str | None = None  # tensor parallel: "column", "row", or None (the whole layer)
    aliases: tuple[str, ...] = ()  # the layer's other names (one module reachable twice): the same new layer


@dataclasses.dataclass
class _Experts:  # an experts module that becomes an MXFP4Experts
    name: str
    layout: moe.ExpertsLayout
    module: nn.Module  # the model's, for its activation's parameters
    gptoss: bool  # weights as GPT-OSS *_blocks / *_scales [E, ...], else Quark's per-expert layers


@dataclasses.dataclass
class _Fill:  # one model tensor (all its tied names) from one checkpoint tensor
    key: str
    refs: list  # (module, attribute) pairs naming the same tensor
    old: torch.Tensor


@dataclasses.dataclass
class _Plan:
    swaps: list
    experts: list
    fills: list
    rebuild: list  # modules whose non-persistent buffers are recomputed on the device
    move: list  # (module, buffer name) of non-persistent buffers moved to the device
    unused: list  # checkpoint tensors the model has no place for (strict=False)
    kv_note: str | None


def _device_of(model: nn.Module, device) -> torch.device:
    if device is not None:
        return torch.device(device)
    real = {t.device for t in [*model.parameters(), *model.buffers()] if t.device.type != "meta"}
    if len(real) > 1:
        raise ValueError(f"the model's tensors are on {sorted(map(str, real))}: pass device= to say where the "
                         "checkpoint goes")
    return real.pop() if real else torch.device("cpu")


def _kv_attribute(name: str) -> str:
    child = name.rpartition(".")[2]
    return {"k_proj": "k_scale", "v_proj": "v_scale"}.get(child, f"{child}_output_scale")


def _rebuildable(module: nn.Module) -> bool:
    # This library's hook, else transformers' rotary embeddings (constructed from their config alone).
    return callable(getattr(module, "init_buffers", None)) or (
        "RotaryEmbedding" in type(module).__name__ and hasattr(module, "config"))


def _plan(model: nn.Module, ckpt: Checkpoint, device: torch.device, strict: bool,
          tp: TensorParallel | None = None) -> _Plan:
    qc = ckpt.config.get("quantization_config")
    gptoss = isinstance(qc, dict) and qc.get("quant_method") == "mxfp4"
    if gptoss:  # GPT-OSS: the experts are MXFP4, every linear layer the model's own
        config = QuarkConfig(global_rule=LayerRule(LayerKind.FLOAT, "quantization_config.quant_method 'mxfp4' "
                                                   "(GPT-OSS: MXFP4 experts only)"))
        if tp is not None:
            raise ValueError("tp= shards Quark checkpoints' MXFP4 layers; a GPT-OSS checkpoint has none")
    else:
        config = quark_config(ckpt.config)
    rank, world = tp.place() if tp is not None else (0, 1)
    for name, m in model.named_modules():
        if isinstance(m, (MXFP4Linear, moe.MXFP4Experts)):
            raise ValueError(f"layer {name!r} is already a {type(m).__name__} (the model was quantized or loaded "
                             "before): a checkpoint loads into the model as built, with its nn.Linear and experts "
                             "modules (build it again, on the meta device to skip its float weights)")
    swaps, experts, used, quantized_prefixes = [], [], set(), []
    names_of: dict[int, list[str]] = {}  # every name of each linear layer (save writes a shared one once)
    for name, m in model.named_modules(remove_duplicate=False):
        if isinstance(m, nn.Linear):
            names_of.setdefault(id(m), []).append(name)
    for name, m in model.named_modules():
        layout = moe.experts_layout(m)
        if layout is None:
            continue  # experts load whole, on every rank under tp= (no expert parallelism)
        used |= _plan_experts(ckpt, config, name, layout, gptoss)
        experts.append(_Experts(name, layout, m, gptoss))
        quantized_prefixes.append(f"{name}.")
    for name, m in model.named_modules():
        if not isinstance(m, nn.Linear) or name.startswith(tuple(quantized_prefixes)):
            continue
        rule = config.rule(name, type(m).__name__)
        if rule.kind is LayerKind.FP8:
            raise ValueError(f"layer {name!r}: {rule.where} is FP8; FP8 layers are not supported by this library")
        style = tp.style(name) if tp is not None else None
        if rule.kind is LayerKind.FLOAT:
            if style is not None:
                raise ValueError(f"layer {name!r}: tp= shards it ({style}), but the checkpoint keeps it unquantized "
                                 f"({rule.where}); tp= shards MXFP4 layers only")
            continue  # its weight and bias are ordinary tensors of the state_dict
        n, k = m.out_features, m.in_features
        if k % BLOCK:
            raise ValueError(f"layer {name!r}: in_features ({k}) is not a multiple of {BLOCK}, yet the checkpoint's "
                             f"quantization_config quantizes it ({rule.where})")
        info = ckpt.tensors.get(f"{name}.weight")
        hint = ""
        if info is not None and info.dtype in FLOAT_DTYPES:
            hint = (" (the checkpoint stores it unquantized, yet the config does not exclude it: exclude entries "
                    "match a name exactly or, written 're:<regex>', by re.match, as vLLM and SGLang do)")
        ckpt.check(f"{name}.weight", ("U8",), (n, k // 2), f"Quark MXFP4 weight: uint8 [N, K/2]{hint}")
        ckpt.check(f"{name}.weight_scale", SCALE_DTYPES, (n, k // BLOCK), "Quark MXFP4 scales: e8m0 [N, K/32]")
        used |= {f"{name}.weight", f"{name}.weight_scale"}
        if m.bias is not None:
            ckpt.check(f"{name}.bias", FLOAT_DTYPES, (n,), f"layer {name!r} has a bias: a float [{n}] tensor")
            used.add(f"{name}.bias")
        kv = None
        if rule.kv_output:
            info = ckpt.tensors.get(f"{name}.output_scale")
            if info is None or info.dtype not in FLOAT_DTYPES or info.shape not in ((), (1,)):
                raise ValueError(f"checkpoint tensor {name + '.output_scale'!r} must exist as a float scalar (the "
                                 f"FP8 KV-cache scale that {rule.where} declares), got "
                                 f"{info and (info.dtype, list(info.shape))}")
            used.add(f"{name}.output_scale")
            kv = _kv_attribute(name)
        span = None
        if style is not None:
            if m.weight.dtype != torch.bfloat16:
                raise ValueError(f"layer {name!r} is {m.weight.dtype}: tensor-parallel layers compute in bf16, so "
                                 "tp= needs a bf16 model")
            size, what = (n, "N (out_features)") if style == "column" else (k, "K (in_features)")
            span = shard_range(size, rank, world, f"layer {name!r} ({style} parallel): {what}")
        aliases = tuple(other for other in names_of.get(id(m), ()) if other != name)
        swaps.append(_Swap(name, n, k, m.bias is not None, kv, m.weight.dtype, span, style, aliases))
        quantized_prefixes += [f"{other}." for other in (name, *aliases)]
    prefixes = tuple(quantized_prefixes)

    groups: dict[object, _Fill] = {}
    for key, t in model.state_dict(keep_vars=True).items():
        if key.startswith(prefixes):
            continue
        # Tied tensors are one object (on meta, where every data_ptr is 0) or one storage: one fill for all.
        ident = id(t) if t.is_meta else ((t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
                                         if t.numel() else key)
        mod_name, _, attr = key.rpartition(".")
        ref = (model.get_submodule(mod_name) if mod_name else model, attr)
        if ident in groups:
            groups[ident].refs.append((key, ref))
        else:
            groups[ident] = _Fill(key, [(key, ref)], t)
    fills = []
    for fill in groups.values():
        present = [key for key, _ in fill.refs if key in ckpt]
        if not present:
            raise ValueError(f"checkpoint tensor {fill.key!r} is missing (every tensor of the model's state_dict "
                             "outside its MXFP4 layers must be in the checkpoint)")
        t = fill.old
        for key in present:
            info = ckpt.tensors[key]
            same_kind = info.torch_dtype is not None and (
                info.torch_dtype == t.dtype or (info.torch_dtype.is_floating_point and t.dtype.is_floating_point
                                                and info.dtype in FLOAT_DTYPES))
            if not same_kind:
                raise ValueError(f"checkpoint tensor {key!r} is {info.dtype}, must be the model's {t.dtype} (a float "
                                 "tensor of another float dtype is cast)")
            if info.shape != tuple(t.shape):
                raise ValueError(f"checkpoint tensor {key!r} has shape {list(info.shape)}, must be the model's "
                                 f"{list(t.shape)}")
            used.add(key)
        fills.append(_Fill(present[0], [ref for _, ref in fill.refs], t))

    rebuild, move = [], []
    for mod_name, m in model.named_modules():
        names = [b for b in m._non_persistent_buffers_set if m._buffers.get(b) is not None]
        meta = [b for b in names if m._buffers[b].is_meta]
        if meta:
            if not _rebuildable(m):
                raise ValueError(f"buffer {(mod_name + '.' if mod_name else '') + meta[0]!r} is on the meta device "
                                 "and not in checkpoints (non-persistent): its module must define "
                                 "init_buffers(device) or be a transformers rotary embedding")
            rebuild.append(m)
        move += [(m, b) for b in names if b not in meta and m._buffers[b].device != device]

    unused = sorted(set(ckpt.tensors) - used)
    if unused and strict:
        raise ValueError(f"checkpoint tensors the model has no place for (strict=True): {unused[:8]}"
                         f"{' ...' if len(unused) > 8 else ''}")
    kv_note = None
    if any(s.kv_scale for s in swaps):
        kv_note = (f"checkpoint {str(ckpt.path)!r}: the FP8 KV-cache scales of export.kv_cache_group "
                   f"{list(config.kv_cache_group)} are kept as float32 buffers (<attention>.k_scale / .v_scale) for "
                   "a KV-cache quantizer; the model's attention keeps its KV cache in its own dtype")
    return _Plan(swaps, experts, fills, rebuild, move, unused, kv_note)


def _projections(layout: moe.ExpertsLayout) -> tuple[tuple[str, int, int], ...]:
    """(name, N, K) of each expert's Quark projections."""
    h, i = layout.hidden_size, layout.intermediate_size
    return ("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)


def _plan_experts(ckpt: Checkpoint, config: QuarkConfig, name: str, layout: moe.ExpertsLayout,
                  gptoss: bool) -> set[str]:
    """Checks the checkpoint's tensors of the experts module ``name``; returns their names."""
    e, h, i = layout.num_experts, layout.hidden_size, layout.intermediate_size
    if h % BLOCK or i % BLOCK:
        raise ValueError(f"experts {name!r}: hidden ({h}) and intermediate ({i}) sizes must be multiples of {BLOCK}")
    used = set()
    if gptoss:
        if layout.activation is not moe.Activation.GPT_OSS:
            raise ValueError(f"experts {name!r} ({layout.activation.name}): a GPT-OSS checkpoint holds GPT-OSS experts")
        for proj, n, k in (("gate_up_proj", 2 * i, h), ("down_proj", h, i)):
            p = f"{name}.{proj}"
            ckpt.check(f"{p}_blocks", ("U8",), (e, n, k // BLOCK, 16), "GPT-OSS MXFP4 blocks: uint8 [E, N, K/32, 16]")
            ckpt.check(f"{p}_scales", ("U8",), (e, n, k // BLOCK), "GPT-OSS MXFP4 scales: uint8 [E, N, K/32]")
            used |= {f"{p}_blocks", f"{p}_scales"}
            if layout.bias:
                ckpt.check(f"{p}_bias", FLOAT_DTYPES, (e, n), f"experts {name!r} have biases: float [E, N]")
                used.add(f"{p}_bias")
        return used
    for x in range(e):
        for proj, n, k in _projections(layout):
            p = f"{name}.{x}.{proj}"
            rule = config.rule(p, "Linear")
            if rule.kind is not LayerKind.MXFP4:
                raise ValueError(f"layer {p!r}: {rule.where} makes it {rule.kind.name}; the experts of {name!r} load "
                                 "as MXFP4 only (every expert's gate_proj, up_proj and down_proj)")
            ckpt.check(f"{p}.weight", ("U8",), (n, k // 2), "Quark MXFP4 weight: uint8 [N, K/2]")
            ckpt.check(f"{p}.weight_scale", SCALE_DTYPES, (n, k // BLOCK), "Quark MXFP4 scales: e8m0 [N, K/32]")
            used |= {f"{p}.weight", f"{p}.weight_scale"}
            if layout.bias:
                ckpt.check(f"{p}.bias", FLOAT_DTYPES, (n,), f"experts {name!r} have biases: a float [{n}] tensor")
                used.add(f"{p}.bias")
    return used


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
