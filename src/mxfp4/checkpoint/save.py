"""Writing a model in the Quark W4A4 MXFP4 layout that vLLM's and SGLang's Quark loaders read."""
from __future__ import annotations

import json
import pathlib

import torch

from .._version import __version__
from ..formats import BLOCK, ScaleRule
from ..moe import MXFP4Experts, split_gate_up
from ..nn import MXFP4Linear
from ..tensor import Layout
from .quark import export_config
from .safetensors import NAMES, Entry, parse_size, write_shards

_KV = {"k_proj": "k_scale", "v_proj": "v_scale"}  # the buffers load_into keeps the FP8 KV-cache scales in


def _kv_layers(model: torch.nn.Module, layers: dict[str, MXFP4Linear]) -> tuple[str, ...]:
    patterns = []
    for child, attr in _KV.items():
        names = [n for n in layers if n.rpartition(".")[2] == child]
        parents = [model.get_submodule(n.rpartition(".")[0]) for n in names]
        have = [isinstance(getattr(p, attr, None), torch.Tensor) for p in parents]
        if any(have) and not all(have):
            missing = [n for n, h in zip(names, have) if not h]
            raise ValueError(f"layers {missing[:4]} have no {attr} beside them while other {child} layers do: the "
                             f"FP8 KV-cache pattern '*{child}' would cover them all")
        if names and all(have):
            patterns.append(f"*{child}")
    return tuple(patterns)


def save(model: torch.nn.Module, path: str | pathlib.Path, config: dict | None = None, *,
         max_shard_size: int | str = "5GB") -> pathlib.Path:
    """Writes ``model`` in the Quark W4A4 MXFP4 format; returns the directory.

    Each :class:`mxfp4.nn.MXFP4Linear` becomes ``<name>.weight`` uint8 [N, K/2] / ``.weight_scale``
    [N, K/32] (the plain layout of its bytes) and ``.bias``; every other tensor of
    ``model.state_dict()`` is saved as it is (tied tensors once); the remaining ``nn.Linear`` layers
    are listed in ``exclude`` by name. Each :class:`mxfp4.moe.MXFP4Experts` ``<p>`` is written as Quark's
    per-expert layers ``<p>.<e>.gate_proj`` / ``up_proj`` / ``down_proj`` (``.weight``, ``.weight_scale``,
    ``.bias`` when it has biases): GPT-OSS's interleaved gate_up rows split into their gate (even) and up
    (odd) rows. FP8 KV-cache scales that loading kept (``k_scale`` /
    ``v_scale`` beside ``k_proj`` / ``v_proj``) are written back as ``<k_proj>.output_scale`` with
    their ``layer_quant_config`` entries and ``export.kv_cache_group``. Tensors go, in state_dict
    order and one at a time (moved to the host when their turn comes), into ``model.safetensors``
    or, past ``max_shard_size`` ("5GB": 10**9 bytes a GB; or an int), shards
    ``model-0000k-of-0000n.safetensors`` with ``model.safetensors.index.json``. ``config.json`` is
    ``config`` (default: ``model.config.to_dict()`` where the model has one) with the full
    ``quantization_config`` set.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(path, (str, pathlib.Path)):
        raise TypeError(f"path must be a directory (str or pathlib.Path), got {type(path).__name__}")
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a dict (config.json's object) or None, got {type(config).__name__}")
    limit = parse_size(max_shard_size)
    path = pathlib.Path(path)
    layers = {n: m for n, m in model.named_modules() if isinstance(m, MXFP4Linear)}
    experts = {n: m for n, m in model.named_modules() if isinstance(m, MXFP4Experts)}
    first = {id(m): n for n, m in [*layers.items(), *experts.items()]}
    aliases = tuple(f"{n}." for n, m in model.named_modules(remove_duplicate=False)  # a shared layer: written once
                    if id(m) in first and first[id(m)] != n)
    for name, m in [*layers.items(), *experts.items()]:
        if m.scale_rule is not ScaleRule.AITER:
            raise ValueError(f"layer {name!r} quantizes activations with ScaleRule.{m.scale_rule.name}; "
                             "the Quark format written here states aiter's rule (Quark's 'even')")
    excluded = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    kv_layers = _kv_layers(model, layers)

    entries, seen, plain = [], set(), {}

    def weight(name, m):
        def make():
            w = m.weight.to_layout(Layout.PLAIN)
            plain[name] = w.scales  # written next: one layer's bytes on the host at a time
            return w.data
        return make

    for key, t in model.state_dict(keep_vars=True).items():
        owner, _, attr = key.rpartition(".")
        if key.startswith(aliases):
            continue  # under its first name, as a tied tensor
        if owner in experts:
            if attr == "gate_up_data":  # the module's whole checkpoint, written at its first tensor
                entries += _expert_entries(owner, experts[owner])
            continue
        if owner in layers:
            m = layers[owner]
            if attr == "weight_data":
                entries.append(Entry(f"{owner}.weight", "U8", (m.out_features, m.in_features // 2), weight(owner, m)))
                entries.append(Entry(f"{owner}.weight_scale", "U8", (m.out_features, m.in_features // 32),
                                     lambda owner=owner: plain.pop(owner)))
                parent_name, _, child = owner.rpartition(".")
                if f"*{child}" in kv_layers:
                    scale = getattr(model.get_submodule(parent_name), _KV[child])
                    entries.append(Entry(f"{owner}.output_scale", NAMES[scale.dtype], tuple(scale.shape),
                                         lambda s=scale: s.detach()))
            elif attr == "bias":
                entries.append(Entry(key, NAMES[t.dtype], tuple(t.shape), lambda t=t: t.detach()))
            continue
        if t.is_meta:
            raise ValueError(f"model tensor {key!r} is on the meta device: there is nothing to save")
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype) if t.numel() else None
        if ident is not None and ident in seen:
            continue  # a tied tensor: saved once, under its first name
        seen.add(ident)
        if t.dtype not in NAMES:
            raise ValueError(f"model tensor {key!r} is {t.dtype}, which safetensors has no name for")
        entries.append(Entry(key, NAMES[t.dtype], tuple(t.shape), lambda t=t: t.detach()))
    if config is None:
        to_dict = getattr(getattr(model, "config", None), "to_dict", None)
        config = to_dict() if callable(to_dict) else {}
    config = {**config, "quantization_config": export_config(excluded, kv_layers, f"mxfp4 {__version__}")}
    path.mkdir(parents=True, exist_ok=True)
    write_shards(path, entries, limit)
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")
    return path


def _expert_entries(name: str, m: MXFP4Experts) -> list[Entry]:
    """Quark's per-expert layers of ``m``, one expert's projection in plain bytes on the host at a time."""
    h, i = m.hidden_size, m.intermediate_size
    pending = {}

    def part(e: int, proj: str, what: str):
        def make():
            key = (e, proj)
            if key not in pending:  # gate and up come from one expert's gate_up rows
                which = "down" if proj == "down_proj" else "gate_up"
                w = m.weights(which).plain(e)
                if which == "down":
                    pending[key] = {"data": w.data, "scales": w.scales}
                else:
                    for p, data, scales in zip(("gate_proj", "up_proj"), *[split_gate_up(t, m.activation)
                                                                          for t in (w.data, w.scales)]):
                        pending[(e, p)] = {"data": data, "scales": scales}
            t = pending[key].pop(what)
            if not pending[key]:
                del pending[key]
            return t
        return make

    entries = []
    for e in range(m.num_experts):
        for proj, n, k in (("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)):
            prefix = f"{name}.{e}.{proj}"
            entries.append(Entry(f"{prefix}.weight", "U8", (n, k // 2), part(e, proj, "data")))
            entries.append(Entry(f"{prefix}.weight_scale", "U8", (n, k // BLOCK), part(e, proj, "scales")))
            if proj == "down_proj" and m.down_bias is not None:
                entries.append(Entry(f"{prefix}.bias", NAMES[m.dtype], (n,), lambda e=e: m.down_bias[e].detach()))
            elif proj != "down_proj" and m.gate_up_bias is not None:
                entries.append(Entry(f"{prefix}.bias", NAMES[m.dtype], (n,), lambda e=e, j=int(proj == "up_proj"):
                                     split_gate_up(m.gate_up_bias[e].detach(), m.activation)[j]))
    return entries


__all__ = ["save"]
