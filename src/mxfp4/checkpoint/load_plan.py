"""The plan of a checkpoint load (:func:`mxfp4.checkpoint.loader.load_into`), made before the model is touched:
every header and the config checked against the model, which linear layers become MXFP4Linear (or this rank's
shard) and which experts modules MXFP4Experts, which tensors fill which names, which buffers are rebuilt or
moved, and which checkpoint tensors go unused."""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..distributed import TensorParallel, shard_range
from .. import moe
from ..formats import BLOCK
from ..nn import MXFP4Linear
from .quark import LayerKind, LayerRule, QuarkConfig, quark_config
from .safetensors import FLOAT_DTYPES, SCALE_DTYPES, Checkpoint


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
