"""AMD Quark's ``quantization_config``: which layers a checkpoint holds as W4A4 MXFP4, and the block
this library writes.

The rules follow the published readers (vLLM's and SGLang's ``QuarkConfig``): a layer is left
unquantized when an ``exclude`` entry equals its name or, written ``re:<regex>``, ``re.match``-es
it (a prefix match; globs are not patterns there); otherwise its spec is the first
``layer_quant_config`` entry whose key matches it (``fnmatch`` for a key with wildcards, equality
otherwise), else ``layer_type_quant_config[<class name>]``, else ``global_quant_config``.
``export.kv_cache_group`` names the ``layer_quant_config`` entries (``fnmatch``) whose
``output_tensors`` is the KV cache's FP8 per-tensor spec; their ``<layer>.output_scale`` tensors
hold the scales; ``kv_cache_quant_config`` entries (the KV spec alone, or Quark 0.13's whole layer
config) are checked as that spec.

The policy, meant to last across exporter releases: every field known to change the numerics of the
layers this library runs (dtype, qscheme, group and block size, scale format and rule, rounding,
dynamic or static inputs, bias quantization, online rotations, shared scales, FP8 layers) is checked,
and a config it does not run is refused with a ValueError naming the field; metadata (observer setup,
``zero_point_type`` of the symmetric MX and FP8 specs, ``max_input_numel``, ``version``) is accepted;
a field never seen before is accepted with one logged note (logger ``mxfp4``) naming it.
"""
from __future__ import annotations

import dataclasses
import enum
import fnmatch
import logging
import re

from ..formats import BLOCK

log = logging.getLogger("mxfp4")


class LayerKind(enum.Enum):
    """How a linear layer of a checkpoint is stored and run."""

    MXFP4 = "W4A4 MXFP4: <p>.weight uint8 [N, K/2], <p>.weight_scale e8m0 [N, K/32]; inputs quantized per call"
    FLOAT = "unquantized: the model's own layer, <p>.weight as stored (a float dtype, cast to the model's)"
    FP8 = "FP8 weights: not run by this library"


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """The spec a layer resolves to: its kind, the config field it came from, whether its output is the
    FP8 KV cache (``kv_cache_group``: ``<p>.output_scale`` holds the scale)."""

    kind: LayerKind
    where: str
    kv_output: bool = False


_WEIGHT_SPEC = {"dtype": "fp4", "qscheme": "per_group", "group_size": BLOCK, "scale_format": "e8m0",
                "is_dynamic": False}
_INPUT_SPEC = {**_WEIGHT_SPEC, "is_dynamic": True, "round_method": "half_even", "scale_calculation_mode": "even"}
_DEFAULTS = ("round_method", "scale_calculation_mode")  # null means Quark's default, the value wanted
_ABSENT_OR = {"ch_axis": (None, -1, 1), "block_size": (None, BLOCK), "mx_element_dtype": (None, "fp4"),
              "is_scale_quant": (None, False)}
# Metadata: how Quark's observer was set up (its class, buffers, input bound), and the integer type a zero
# point would have (MX and FP8 per-tensor specs are symmetric: none is stored). None of it changes the stored
# bytes or the run.
_METADATA = {"symmetric", "scale_type", "observer_cls", "enable_buffer_reuse", "max_input_numel",
             "zero_point_type", "qat_spec"}
# A stored weight is read as its bytes, however its scales were chosen and its values rounded.
_WEIGHT_METADATA = _METADATA | {"round_method", "scale_calculation_mode"}
_KV_SPEC = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}
_KV_METADATA = _METADATA | {"ch_axis", "group_size", "round_method", "scale_calculation_mode", "scale_format",
                            "is_scale_quant", "mx_element_dtype", "block_size"}
_LAYER_KEYS = {"weight", "input_tensors", "output_tensors", "bias", "target_device"}
# Top-level fields read below or that do not change the numerics of what this library runs (kv_cache_post_rope:
# where Quark's FP8 KV cache sits, the cache being kept in the model's dtype here).
_TOP_KEYS = {"quant_method", "global_quant_config", "layer_quant_config", "layer_type_quant_config",
             "kv_cache_quant_config", "kv_cache_post_rope", "exclude", "export", "algo_config", "quant_mode",
             "version", "softmax_quant_spec", "shared_scale_groups", "packed_modules_mapping",
             "pre_quant_opt_config"}
_EXPORT_KEYS = {"kv_cache_group", "min_kv_scale", "pack_method", "weight_format", "weight_merge_groups"}
_QC = "quantization_config"


class _Unknown:
    """The fields of one config that this library has never seen, collected for one logged note: each is
    taken not to change the numerics (every field known to does is checked by name)."""

    def __init__(self) -> None:
        self.fields: list[str] = []

    def add(self, where: str, value) -> None:
        self.fields.append(f"{where} = {value!r}")

    def note(self) -> None:
        if self.fields:
            log.info("quantization_config: fields this library has not seen, read as metadata (they are not "
                     "among the fields that change the numerics, which are checked): %s", "; ".join(self.fields))


def _check_spec(spec, want: dict, metadata: set, absent_or: dict, required: tuple, where: str,
                unknown: _Unknown) -> None:
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: {spec!r} is not supported (this library runs W4A4 MXFP4: weight and "
                         "input_tensors both fp4, per_group, group_size 32, e8m0 scales)")
    for key, value in spec.items():
        if key in metadata:
            continue
        if key in want:
            if value != want[key] and not (key in _DEFAULTS and value is None):
                raise ValueError(f"{where}.{key}: {value!r} is not supported (must be {want[key]!r})")
        elif key in absent_or:
            if value not in absent_or[key]:
                raise ValueError(f"{where}.{key}: {value!r} is not supported (must be one of {absent_or[key]})")
        else:
            unknown.add(f"{where}.{key}", value)
    for key in required:
        if key not in spec:
            raise ValueError(f"{where}.{key}: missing (must be {want[key]!r})")


def _check_kv_spec(spec, where: str, unknown: _Unknown) -> None:
    _check_spec(spec, _KV_SPEC, _KV_METADATA, {}, ("dtype", "qscheme"), where, unknown)


def _layer_rule(cfg, where: str, kv: bool, unknown: _Unknown) -> LayerRule:
    if not isinstance(cfg, dict):
        raise ValueError(f"{where}: {cfg!r} is not supported (must be an object of weight / input_tensors specs)")
    for key in cfg:
        if key not in _LAYER_KEYS:
            unknown.add(f"{where}.{key}", cfg[key])
    if cfg.get("bias") is not None:
        raise ValueError(f"{where}.bias: {cfg['bias']!r} is not supported (must be null: biases stay as they are)")
    if kv:
        _check_kv_spec(cfg.get("output_tensors"), f"{where}.output_tensors", unknown)
    elif cfg.get("output_tensors") is not None:
        raise ValueError(f"{where}.output_tensors: {cfg['output_tensors']!r} is not supported (must be null, or "
                         "the FP8 KV-cache spec of an entry that export.kv_cache_group names)")
    weight, inputs = cfg.get("weight"), cfg.get("input_tensors")
    if weight is None and inputs is None:
        return LayerRule(LayerKind.FLOAT, where, kv)
    if isinstance(weight, dict) and str(weight.get("dtype", "")).startswith("fp8"):
        return LayerRule(LayerKind.FP8, f"{where}.weight.dtype", kv)
    _check_spec(weight, _WEIGHT_SPEC, _WEIGHT_METADATA, _ABSENT_OR, ("dtype", "group_size", "scale_format"),
                f"{where}.weight", unknown)
    _check_spec(inputs, _INPUT_SPEC, _METADATA, _ABSENT_OR, ("dtype", "group_size", "scale_format", "is_dynamic"),
                f"{where}.input_tensors", unknown)
    return LayerRule(LayerKind.MXFP4, where, kv)


def _check_kv_entry(entry, where: str, unknown: _Unknown) -> None:
    """A ``kv_cache_quant_config`` entry: the KV cache's spec alone, or a whole layer config
    whose ``output_tensors`` is it (Quark 0.13: ``weight``, ``input_tensors``, ``output_tensors``, ``bias``,
    ``target_device``), checked as a layer whose output is the KV cache."""
    if isinstance(entry, dict) and any(key in _LAYER_KEYS for key in entry):
        rule = _layer_rule(entry, where, True, unknown)
        if rule.kind is LayerKind.FP8:
            raise ValueError(f"{rule.where}: {entry['weight']['dtype']!r} is not supported (FP8 weights; this "
                             "library runs W4A4 MXFP4)")
        return
    _check_kv_spec(entry, where, unknown)


def _matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) if any(c in pattern for c in "*?[") else name == pattern


def _check_algorithms(algos, field: str) -> None:
    if algos is None:
        return
    items = algos if isinstance(algos, list) else [algos]
    for i, algo in enumerate(items):
        where = f"{_QC}.{field}[{i}]"
        if not isinstance(algo, dict):
            raise ValueError(f"{where}: {algo!r} is not supported (must be an object with a 'name')")
        name = str(algo.get("name", "")).lower()
        # Rotations applied at run time (QuaRot / SpinQuant R3, R4, an online R1) change what each layer
        # sees; those folded into the stored weights do not.
        online = [k for k in ("online_r1_rotation", "online_config", "r3", "r4", "online_had") if algo.get(k)]
        if name in ("rotation", "quarot", "spinquant") and online:
            raise ValueError(f"{where}: the {name!r} algorithm rotates activations at run time ({', '.join(online)}); "
                             "online rotations are not supported")


@dataclasses.dataclass(frozen=True)
class QuarkConfig:
    """A checkpoint's ``quantization_config``, validated: the rules of :func:`quark_config` resolved per layer
    by :meth:`rule`. ``kv_cache`` is the FP8 KV-cache spec when ``export.kv_cache_group`` is set."""

    exclude: tuple[str, ...] = ("lm_head",)
    layer_rules: tuple[tuple[str, LayerRule], ...] = ()
    type_rules: tuple[tuple[str, LayerRule], ...] = ()
    global_rule: LayerRule = LayerRule(LayerKind.MXFP4, f"{_QC}.global_quant_config")
    kv_cache_group: tuple[str, ...] = ()
    kv_cache: dict | None = dataclasses.field(default=None, compare=False)

    def excluded(self, name: str) -> bool:
        """Whether ``exclude`` leaves the layer ``name`` unquantized: an entry equal to it, or ``re:<regex>``
        with ``re.match`` (as vLLM's and SGLang's ``should_ignore_layer``)."""
        return any(re.match(e[3:], name) if e.startswith("re:") else e == name for e in self.exclude)

    def rule(self, name: str, type_name: str = "Linear") -> LayerRule:
        """The rule of the linear layer ``name`` (a module of class ``type_name``)."""
        if self.excluded(name):
            return LayerRule(LayerKind.FLOAT, f"{_QC}.exclude")
        for pattern, rule in self.layer_rules:
            if _matches(pattern, name):
                return rule
        return dict(self.type_rules).get(type_name, self.global_rule)


def quark_config(config: dict) -> QuarkConfig:
    """The validated ``quantization_config`` of a model's ``config.json`` (a dict), or ValueError naming the
    unsupported field."""
    qc = config.get(_QC)
    if qc is None:
        raise ValueError("config.json has no quantization_config: not a quantized checkpoint")
    if not isinstance(qc, dict):
        raise ValueError(f"{_QC}: {qc!r} must be an object")
    method = qc.get("quant_method")
    if method != "quark":
        hint = (" (a GPT-OSS checkpoint: mxfp4.quantize_(model, checkpoint=path) loads its experts)"
                if method == "mxfp4" else "")
        raise ValueError(f"{_QC}.quant_method: {method!r} is not supported (must be 'quark'){hint}")
    unknown = _Unknown()
    for key in qc:
        if key not in _TOP_KEYS:
            unknown.add(f"{_QC}.{key}", qc[key])
    export = qc.get("export") or {}
    if not isinstance(export, dict):
        raise ValueError(f"{_QC}.export: {export!r} must be an object")
    for key in export:
        if key not in _EXPORT_KEYS:
            unknown.add(f"{_QC}.export.{key}", export[key])
    weight_format = export.get("weight_format", "real_quantized")
    if weight_format != "real_quantized":
        raise ValueError(f"{_QC}.export.weight_format: {weight_format!r} is not supported "
                         "(must be 'real_quantized': packed uint8 weights)")
    if export.get("weight_merge_groups") is not None:
        raise ValueError(f"{_QC}.export.weight_merge_groups: {export['weight_merge_groups']!r} is not supported "
                         "(must be null: each layer's weight and scales stored on their own)")
    if export.get("pack_method") not in (None, "reorder", "order"):  # int4 word order; fp4 pairs are bytes
        raise ValueError(f"{_QC}.export.pack_method: {export['pack_method']!r} is not supported")
    group = export.get("kv_cache_group") or []
    if not isinstance(group, list) or not all(isinstance(g, str) for g in group):
        raise ValueError(f"{_QC}.export.kv_cache_group: {group!r} must be a list of layer_quant_config patterns")
    _check_algorithms(qc.get("algo_config"), "algo_config")
    _check_algorithms(qc.get("pre_quant_opt_config"), "pre_quant_opt_config")  # older exports' algorithms
    if qc.get("softmax_quant_spec") is not None:
        raise ValueError(f"{_QC}.softmax_quant_spec: {qc['softmax_quant_spec']!r} is not supported (must be null)")
    if qc.get("shared_scale_groups"):
        raise ValueError(f"{_QC}.shared_scale_groups: {qc['shared_scale_groups']!r} is not supported (must be "
                         "empty: each layer's inputs are quantized with their own scales)")
    kv_table = qc.get("kv_cache_quant_config") or {}
    if not isinstance(kv_table, dict):
        raise ValueError(f"{_QC}.kv_cache_quant_config: {kv_table!r} must be an object")
    for key, spec in kv_table.items():
        _check_kv_entry(spec, f"{_QC}.kv_cache_quant_config[{key!r}]", unknown)

    tables = {}
    for table in ("layer_quant_config", "layer_type_quant_config"):
        entries = qc.get(table) or {}
        if not isinstance(entries, dict):
            raise ValueError(f"{_QC}.{table}: {entries!r} must be an object (pattern -> layer spec)")
        tables[table] = entries
    kv_keys = [key for key in tables["layer_quant_config"] if any(fnmatch.fnmatchcase(key, g) for g in group)]
    for g in group:
        if not any(fnmatch.fnmatchcase(key, g) for key in tables["layer_quant_config"]):
            raise ValueError(f"{_QC}.export.kv_cache_group: {g!r} names no layer_quant_config entry (its FP8 "
                             "KV-cache spec lives there)")
    kv_specs = [tables["layer_quant_config"][k].get("output_tensors") if isinstance(tables["layer_quant_config"][k],
                dict) else None for k in kv_keys]
    if any(s != kv_specs[0] for s in kv_specs):
        raise ValueError(f"{_QC}.layer_quant_config: the entries {kv_keys} of kv_cache_group have different "
                         "output_tensors (the KV cache has one spec)")
    layer_rules = tuple((key, _layer_rule(cfg, f"{_QC}.layer_quant_config[{key!r}]", key in kv_keys, unknown))
                        for key, cfg in tables["layer_quant_config"].items())
    type_rules = tuple((key, _layer_rule(cfg, f"{_QC}.layer_type_quant_config[{key!r}]", False, unknown))
                       for key, cfg in tables["layer_type_quant_config"].items())
    global_rule = _layer_rule(qc.get("global_quant_config"), f"{_QC}.global_quant_config", False, unknown)

    exclude = qc.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise ValueError(f"{_QC}.exclude: {exclude!r} is not supported (must be a list of names)")
    for i, e in enumerate(exclude):
        if e.startswith("re:"):
            try:
                re.compile(e[3:])
            except re.error as err:
                raise ValueError(f"{_QC}.exclude[{i}]: {e!r} is not a valid regular expression ({err})") from None
    unknown.note()
    return QuarkConfig(tuple(exclude), layer_rules, type_rules, global_rule, tuple(group),
                       kv_specs[0] if kv_specs else None)


# ---- the block this library writes ----------------------------------------------------------------

# The fields of a Quark W4A4 MXFP4 export's specs (OCP MX fp4, per 1x32 group, e8m0 scales).
_FULL_SPEC = {"dtype": "fp4", "qscheme": "per_group", "group_size": BLOCK, "ch_axis": -1, "block_size": None,
              "scale_format": "e8m0", "scale_type": "float", "scale_calculation_mode": "even",
              "round_method": "half_even", "symmetric": None, "is_scale_quant": False, "mx_element_dtype": None,
              "observer_cls": "PerBlockMXObserver"}
_FULL_KV_SPEC = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "ch_axis": None, "group_size": None,
                 "is_dynamic": False, "scale_format": None, "scale_type": "float", "scale_calculation_mode": None,
                 "round_method": "half_even", "symmetric": True, "is_scale_quant": False, "mx_element_dtype": None,
                 "observer_cls": "PerTensorMinMaxObserver"}


def _mxfp4_layer(output_tensors=None) -> dict:
    return {"weight": {**_FULL_SPEC, "is_dynamic": False}, "input_tensors": {**_FULL_SPEC, "is_dynamic": True},
            "output_tensors": output_tensors, "bias": None, "target_device": None}


def export_config(exclude: list[str], kv_layers: tuple[str, ...] = (), version: str = "") -> dict:
    """The ``quantization_config`` of a W4A4 MXFP4 export: ``exclude`` (exact names), and for each pattern of
    ``kv_layers`` (e.g. "*k_proj") a ``layer_quant_config`` entry whose output is the FP8 KV cache, named in
    ``export.kv_cache_group``: the fields vLLM's and SGLang's readers take."""
    return {"quant_method": "quark", "quant_mode": "eager_mode", "version": version, "algo_config": None,
            "global_quant_config": _mxfp4_layer(),
            "layer_quant_config": {p: _mxfp4_layer(dict(_FULL_KV_SPEC)) for p in kv_layers},
            "layer_type_quant_config": {}, "kv_cache_quant_config": {}, "softmax_quant_spec": None,
            "exclude": list(exclude),
            "export": {"kv_cache_group": list(kv_layers), "min_kv_scale": 0.0, "pack_method": "reorder",
                       "weight_format": "real_quantized", "weight_merge_groups": None}}


__all__ = ["LayerKind", "LayerRule", "QuarkConfig", "quark_config", "export_config"]
