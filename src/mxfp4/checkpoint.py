"""Safetensors checkpoints of MXFP4 weights: AMD Quark W4A4 MXFP4 (read and write), GPT-OSS experts (read).

Quark W4A4 MXFP4, per quantized linear layer ``<prefix>``: ``<prefix>.weight`` uint8 [N, K/2]
(two e2m1 codes a byte, element 2i in the low nibble, as :func:`mxfp4.formats.pack_codes`),
``<prefix>.weight_scale`` uint8 [N, K/32] (e8m0, bias 127), ``<prefix>.bias`` as it is; the
activations are quantized per call, per 1x32 block. ``config.json``'s ``quantization_config``
says which linear layers are quantized (all but those ``exclude`` names) and how; a config this
library does not run exactly is refused with a ValueError naming the field (:func:`quark_scheme`).

GPT-OSS MXFP4 (OpenAI): ``*_blocks`` uint8 [E, N, K/32, 16] and ``*_scales`` uint8 [E, N, K/32]
for the MoE experts' projections, the same bytes per expert (:func:`load_gptoss_experts`).

A checkpoint is read lazily: :func:`load` parses the safetensors headers only (and checks that
every tensor lies inside its file); tensors are read one at a time from the memory-mapped file.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import pathlib
import re
import struct

import torch

from .formats import BLOCK, ScaleRule
from .tensor import Layout, MXFP4Tensor, prepare

_DTYPES = {  # safetensors dtype name: (torch dtype or None where torch lacks it, bytes per element)
    "BOOL": (torch.bool, 1), "U8": (torch.uint8, 1), "I8": (torch.int8, 1), "I16": (torch.int16, 2),
    "U16": (getattr(torch, "uint16", None), 2), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
    "I32": (torch.int32, 4), "U32": (getattr(torch, "uint32", None), 4), "F32": (torch.float32, 4),
    "F64": (torch.float64, 8), "I64": (torch.int64, 8), "U64": (getattr(torch, "uint64", None), 8),
    "F8_E4M3": (getattr(torch, "float8_e4m3fn", None), 1), "F8_E5M2": (getattr(torch, "float8_e5m2", None), 1),
    "F8_E8M0": (getattr(torch, "float8_e8m0fnu", None), 1),
}
_SCALE_DTYPES = ("U8", "F8_E8M0")  # e8m0 bytes, stored either way


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """Where a tensor of a checkpoint lies and what its header says (nothing read yet)."""

    file: pathlib.Path
    dtype: str  # safetensors' name: U8, BF16, F32, ...
    shape: tuple[int, ...]

    @property
    def torch_dtype(self) -> torch.dtype | None:
        return _DTYPES[self.dtype][0]


def _read_header(file: pathlib.Path) -> dict[str, TensorInfo]:
    """The tensors of one safetensors file, after checking that each lies inside the file."""
    size = file.stat().st_size
    with open(file, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{file}: not a safetensors file (shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise ValueError(f"{file}: truncated: its header needs {8 + n} bytes, the file has {size}")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise ValueError(f"{file}: the safetensors header is not valid JSON ({e})") from None
    infos = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (start, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        if dtype not in _DTYPES:
            raise ValueError(f"{file}: tensor {name!r} has the unknown safetensors dtype {dtype!r}")
        if end - start != math.prod(shape) * _DTYPES[dtype][1]:
            raise ValueError(f"{file}: tensor {name!r} spans {end - start} bytes, its {dtype} shape {list(shape)} "
                             f"needs {math.prod(shape) * _DTYPES[dtype][1]}")
        if 8 + n + end > size:
            raise ValueError(f"{file}: truncated: tensor {name!r} ends at byte {8 + n + end}, the file has {size} "
                             "(every tensor must lie inside its file)")
        infos[name] = TensorInfo(file, dtype, shape)
    return infos


class Checkpoint:
    """A safetensors checkpoint directory, opened lazily: headers parsed, tensors read on demand.

    ``model.safetensors.index.json`` (a ``weight_map``) names the files when present, else every
    ``*.safetensors`` file of the directory is read. ``config`` is ``config.json`` ({} without one).
    """

    def __init__(self, path: str | pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        if not self.path.is_dir():
            raise ValueError(f"checkpoint path {str(self.path)!r} must be a directory holding *.safetensors")
        config_file = self.path / "config.json"
        self.config = json.loads(config_file.read_text()) if config_file.exists() else {}
        index = self.path / "model.safetensors.index.json"
        if index.exists():
            files = sorted({self.path / f for f in json.loads(index.read_text())["weight_map"].values()})
        else:
            files = sorted(self.path.glob("*.safetensors"))
        if not files:
            raise ValueError(f"checkpoint {str(self.path)!r} has no *.safetensors file")
        self.tensors: dict[str, TensorInfo] = {}
        for file in files:
            if not file.exists():
                raise ValueError(f"{index}: names the file {file.name!r}, which is missing")
            for name, info in _read_header(file).items():
                if name in self.tensors:
                    raise ValueError(f"tensor {name!r} is in both {self.tensors[name].file.name} and {file.name}")
                self.tensors[name] = info
        self._handles: dict[pathlib.Path, object] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def tensor(self, name: str) -> torch.Tensor:
        """One tensor, read from its memory-mapped file onto the CPU."""
        info = self.tensors[name]
        if info.file not in self._handles:
            from safetensors import safe_open

            self._handles[info.file] = safe_open(str(info.file), framework="pt", device="cpu")
        return self._handles[info.file].get_tensor(name)

    def close(self) -> None:
        """Releases the memory maps (a later :meth:`tensor` opens them again)."""
        self._handles.clear()

    def check(self, name: str, dtypes: tuple[str, ...], shape: tuple[int, ...], rule: str) -> None:
        """Raises ValueError naming ``name`` and ``rule`` unless the tensor exists with that dtype and shape."""
        info = self.tensors.get(name)
        if info is None:
            raise ValueError(f"checkpoint tensor {name!r} is missing ({rule})")
        if info.dtype not in dtypes:
            raise ValueError(f"checkpoint tensor {name!r} is {info.dtype}, must be {' or '.join(dtypes)} ({rule})")
        if info.shape != tuple(shape):
            raise ValueError(f"checkpoint tensor {name!r} has shape {list(info.shape)}, must be {list(shape)} ({rule})")

    def mxfp4_weight(self, prefix: str, n: int, k: int) -> MXFP4Tensor:
        """The Quark weight ``<prefix>.weight`` / ``.weight_scale`` of an [n, k] layer, plain layout."""
        self.check(f"{prefix}.weight", ("U8",), (n, k // 2), "Quark MXFP4 weight: uint8 [N, K/2]")
        self.check(f"{prefix}.weight_scale", _SCALE_DTYPES, (n, k // BLOCK), "Quark MXFP4 scales: e8m0 [N, K/32]")
        scales = self.tensor(f"{prefix}.weight_scale").view(torch.uint8)
        return MXFP4Tensor(self.tensor(f"{prefix}.weight"), scales, (n, k), Layout.PLAIN, ScaleRule.AITER)


def load(path: str | pathlib.Path) -> Checkpoint:
    """Opens a safetensors checkpoint directory lazily (headers only); see :class:`Checkpoint`."""
    return Checkpoint(path)


# ---- AMD Quark's quantization_config -------------------------------------------------------------

_WEIGHT_SPEC = {"dtype": "fp4", "qscheme": "per_group", "group_size": BLOCK, "scale_format": "e8m0",
                "is_dynamic": False}
_INPUT_SPEC = {**_WEIGHT_SPEC, "is_dynamic": True, "round_method": "half_even", "scale_calculation_mode": "even"}
_DEFAULTS = ("round_method", "scale_calculation_mode")  # null means Quark's default, the value wanted
_ABSENT_OR = {"ch_axis": (None, -1, 1), "block_size": (None,), "mx_element_dtype": (None,),
              "is_scale_quant": (None, False)}
_IGNORED = {"symmetric", "scale_type", "observer_cls", "enable_buffer_reuse", "max_input_numel"}
# A stored weight is read as its bytes, however its scales were chosen and its values rounded.
_WEIGHT_IGNORED = _IGNORED | {"round_method", "scale_calculation_mode"}


@dataclasses.dataclass(frozen=True)
class QuarkScheme:
    """A supported Quark config: W4A4 MXFP4, activations quantized per call with aiter's rule
    (Quark's ``scale_calculation_mode`` "even", round half to even); ``exclude`` as in the config."""

    exclude: tuple[str, ...] = ("lm_head",)

    def quantizes(self, name: str) -> bool:
        """Whether the linear layer ``name`` is quantized: unless an exclude entry equals it, matches it
        as a glob (``*``, ``?``) or, written ``re:<regex>``, as a full regular expression."""
        for pattern in self.exclude:
            if pattern.startswith("re:"):
                if re.fullmatch(pattern[3:], name):
                    return False
            elif name == pattern or fnmatch.fnmatchcase(name, pattern):
                return False
        return True

    def to_config(self) -> dict:
        """The ``quantization_config`` that :func:`quark_scheme` reads back as this scheme."""
        return {"quant_method": "quark", "export": {"weight_format": "real_quantized"},
                "global_quant_config": {"weight": {**_WEIGHT_SPEC, "ch_axis": -1},
                                        "input_tensors": {**_INPUT_SPEC, "ch_axis": -1},
                                        "output_tensors": None, "bias": None},
                "layer_quant_config": {}, "layer_type_quant_config": {}, "exclude": list(self.exclude)}


def _check_spec(spec, want: dict, ignored: set, required: tuple, where: str) -> None:
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: {spec!r} is not supported (this library runs W4A4 MXFP4: weight and "
                         "input_tensors both fp4, per_group, group_size 32, e8m0 scales)")
    for key, value in spec.items():
        if key in ignored:
            continue
        if key in want:
            if value != want[key] and not (key in _DEFAULTS and value is None):
                raise ValueError(f"{where}.{key}: {value!r} is not supported (must be {want[key]!r})")
        elif key in _ABSENT_OR:
            if value not in _ABSENT_OR[key]:
                raise ValueError(f"{where}.{key}: {value!r} is not supported (must be one of {_ABSENT_OR[key]})")
        else:
            raise ValueError(f"{where}.{key}: unknown field (value {value!r}); not supported")
    for key in required:
        if key not in spec:
            raise ValueError(f"{where}.{key}: missing (must be {want[key]!r})")


def _check_layer_config(cfg, where: str) -> None:
    if not isinstance(cfg, dict):
        raise ValueError(f"{where}: {cfg!r} is not supported (must be a dict of weight / input_tensors specs)")
    _check_spec(cfg.get("weight"), _WEIGHT_SPEC, _WEIGHT_IGNORED, ("dtype", "group_size", "scale_format"),
                f"{where}.weight")
    _check_spec(cfg.get("input_tensors"), _INPUT_SPEC, _IGNORED, ("dtype", "group_size", "scale_format", "is_dynamic"),
                f"{where}.input_tensors")
    for key in ("output_tensors", "bias"):
        if cfg.get(key) is not None:
            raise ValueError(f"{where}.{key}: {cfg[key]!r} is not supported (must be null: outputs and biases "
                             "stay as they are)")


def quark_scheme(config: dict) -> QuarkScheme:
    """The scheme of a model's ``config.json`` (a dict), or ValueError naming the unsupported field."""
    qc = config.get("quantization_config")
    if qc is None:
        raise ValueError("config.json has no quantization_config: not a quantized checkpoint")
    method = qc.get("quant_method")
    if method != "quark":
        hint = " (GPT-OSS's MXFP4 experts: mxfp4.checkpoint.load_gptoss_experts)" if method == "mxfp4" else ""
        raise ValueError(f"quantization_config.quant_method: {method!r} is not supported (must be 'quark'){hint}")
    weight_format = (qc.get("export") or {}).get("weight_format", "real_quantized")
    if weight_format != "real_quantized":
        raise ValueError(f"quantization_config.export.weight_format: {weight_format!r} is not supported "
                         "(must be 'real_quantized': packed uint8 weights)")
    _check_layer_config(qc.get("global_quant_config"), "quantization_config.global_quant_config")
    for table in ("layer_quant_config", "layer_type_quant_config"):
        for key, cfg in (qc.get(table) or {}).items():
            _check_layer_config(cfg, f"quantization_config.{table}[{key!r}]")
    if qc.get("softmax_quant_spec") is not None:
        raise ValueError(f"quantization_config.softmax_quant_spec: {qc['softmax_quant_spec']!r} is not supported "
                         "(must be null)")
    exclude = qc.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise ValueError(f"quantization_config.exclude: {exclude!r} is not supported (must be a list of names)")
    return QuarkScheme(tuple(exclude))


# ---- writing --------------------------------------------------------------------------------------

def save(model: torch.nn.Module, path: str | pathlib.Path, config: dict | None = None) -> pathlib.Path:
    """Writes ``model`` in the Quark W4A4 MXFP4 format: ``model.safetensors`` and ``config.json``.

    Each :class:`mxfp4.nn.MXFP4Linear` becomes ``<name>.weight`` / ``.weight_scale`` (the plain
    layout of its bytes) and ``.bias``; every other tensor of ``model.state_dict()`` is saved as it
    is (tied tensors once). The remaining ``nn.Linear`` layers are listed in ``exclude``.
    ``config.json`` is ``config`` (default: ``model.config.to_dict()`` where the model has one)
    with ``quantization_config`` set. Returns the directory.
    """
    from safetensors.torch import save_file

    from .nn import MXFP4Linear

    path = pathlib.Path(path)
    tensors: dict[str, torch.Tensor] = {}
    quantized, excluded = [], []
    for name, module in model.named_modules():
        if isinstance(module, MXFP4Linear):
            if module.scale_rule is not ScaleRule.AITER:
                raise ValueError(f"layer {name!r} quantizes activations with ScaleRule.{module.scale_rule.name}; "
                                 "the Quark format written here states aiter's rule (Quark's 'even')")
            w = module.weight.to_layout(Layout.PLAIN)
            tensors[f"{name}.weight"] = w.data.contiguous().cpu()
            tensors[f"{name}.weight_scale"] = w.scales.contiguous().cpu()
            if module.bias is not None:
                tensors[f"{name}.bias"] = module.bias.detach().contiguous().cpu()
            quantized.append(name)
        elif isinstance(module, torch.nn.Linear):
            excluded.append(name)
    seen = set()
    for key, t in model.state_dict().items():
        if any(key.startswith(f"{q}.") for q in quantized):
            continue
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype) if t.numel() else None
        if ident is not None and ident in seen:
            continue  # a tied tensor: saved once, under its first name
        seen.add(ident)
        tensors[key] = t.detach().contiguous().cpu()
    if config is None:
        to_dict = getattr(getattr(model, "config", None), "to_dict", None)
        config = to_dict() if callable(to_dict) else {}
    config = {**config, "quantization_config": QuarkScheme(tuple(excluded)).to_config()}
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")
    return path


# ---- GPT-OSS experts ------------------------------------------------------------------------------

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


__all__ = ["Checkpoint", "TensorInfo", "QuarkScheme", "load", "save", "quark_scheme", "load_gptoss_experts"]
