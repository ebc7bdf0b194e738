"""Safetensors checkpoint directories, read and written by this library itself, one tensor at a time.

A directory holds ``model.safetensors``, or ``model-0000k-of-0000n.safetensors`` shards named by
``model.safetensors.index.json``'s ``weight_map``, and ``config.json``. Headers are parsed here
(not by the safetensors package) so that a malformed file is refused with the file and the field
named, and tensors are read with plain file reads into a buffer of their own size: no memory map,
whose touched pages would count against the process until it is closed, so host memory stays at
the tensor being read.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import struct

import torch

from ..formats import BLOCK, ScaleRule
from ..tensor import Layout, MXFP4Tensor

DTYPES = {  # safetensors dtype name: (torch dtype or None where torch lacks it, bytes per element)
    "BOOL": (torch.bool, 1), "U8": (torch.uint8, 1), "I8": (torch.int8, 1), "I16": (torch.int16, 2),
    "U16": (getattr(torch, "uint16", None), 2), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
    "I32": (torch.int32, 4), "U32": (getattr(torch, "uint32", None), 4), "F32": (torch.float32, 4),
    "F64": (torch.float64, 8), "I64": (torch.int64, 8), "U64": (getattr(torch, "uint64", None), 8),
    "F8_E4M3": (getattr(torch, "float8_e4m3fn", None), 1), "F8_E5M2": (getattr(torch, "float8_e5m2", None), 1),
    "F8_E8M0": (getattr(torch, "float8_e8m0fnu", None), 1),
}
NAMES = {dtype: name for name, (dtype, _) in DTYPES.items() if dtype is not None}
SCALE_DTYPES = ("U8", "F8_E8M0")  # e8m0 bytes, stored either way
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
INDEX = "model.safetensors.index.json"
_MAX_HEADER = 100 * 2**20  # the safetensors format's own limit on the header's JSON


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """Where a tensor of a checkpoint lies and what its header says (nothing read yet)."""

    file: pathlib.Path
    dtype: str  # safetensors' name: U8, BF16, F32, ...
    shape: tuple[int, ...]
    offset: int  # first byte in the file
    nbytes: int

    @property
    def torch_dtype(self) -> torch.dtype | None:
        return DTYPES[self.dtype][0]


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """json's object hook: an object that names a key twice is refused (json.loads would keep the last)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def parse_json(text: str | bytes, file: pathlib.Path, what: str):
    """The JSON value of ``text`` (the content of ``file``), or ValueError naming the file: invalid JSON, or
    an object with a key twice (which of the two a reader takes is not defined)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise ValueError(f"{file}: {what} names {e.args[0]!r} twice (each name must appear once)") from None
    except ValueError as e:
        raise ValueError(f"{file}: {what} is not valid JSON ({e})") from None


def read_json(file: pathlib.Path, what: str):
    """The JSON value of ``file``, or ValueError naming the file (:func:`parse_json`)."""
    return parse_json(file.read_text(), file, what)


def read_header(file: pathlib.Path) -> dict[str, TensorInfo]:
    """The tensors of one safetensors file, after checking every header field and that each tensor
    lies inside the file and overlaps no other."""
    size = file.stat().st_size
    with open(file, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{file}: not a safetensors file (shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise ValueError(f"{file}: header length {n} is over the format's limit of {_MAX_HEADER} bytes")
        if 8 + n > size:
            raise ValueError(f"{file}: truncated: its header needs {8 + n} bytes, the file has {size}")
        header = parse_json(f.read(n), file, "the safetensors header")
    if not isinstance(header, dict):
        raise ValueError(f"{file}: the safetensors header must be a JSON object, got {type(header).__name__}")
    infos = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise ValueError(f"{file}: __metadata__ {entry!r} must be an object of strings (the format's rule)")
            continue
        where = f"{file}: tensor {name!r}"
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            raise ValueError(f"{where}: header entry must be an object with dtype, shape and data_offsets, "
                             f"got {entry!r}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise ValueError(f"{where}: dtype {dtype!r} is not a safetensors dtype")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f"{where}: shape {shape!r} must be a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise ValueError(f"{where}: data_offsets {offsets!r} must be [start, end] with 0 <= start <= end")
        start, end = offsets
        need = math.prod(shape) * DTYPES[dtype][1]
        if end - start != need:
            raise ValueError(f"{where}: data_offsets span {end - start} bytes, its {dtype} shape {shape} needs {need}")
        if 8 + n + end > size:
            raise ValueError(f"{file}: truncated: tensor {name!r} ends at byte {8 + n + end}, the file has {size} "
                             "(every tensor must lie inside its file)")
        infos[name] = TensorInfo(file, dtype, tuple(shape), 8 + n + start, need)
    spans = sorted((i.offset, i.offset + i.nbytes, name) for name, i in infos.items() if i.nbytes)
    for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:]):
        if start_b < end_a:
            raise ValueError(f"{file}: data_offsets of tensors {a!r} and {b!r} overlap (bytes {start_b - 8 - n} "
                             f"to {end_a - 8 - n} of the data)")
    return infos


def _index_files(path: pathlib.Path, index: pathlib.Path) -> tuple[list[pathlib.Path], dict[str, str]]:
    data = read_json(index, "the index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index}: 'weight_map' is missing, empty or not an object (tensor name -> file name)")
    for name, file in weight_map.items():
        if not isinstance(file, str) or pathlib.PurePath(file).name != file:
            raise ValueError(f"{index}: weight_map[{name!r}] = {file!r} must be a file name in the directory")
    return sorted({path / f for f in weight_map.values()}), weight_map


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
        self.config = read_json(config_file, "the model config") if config_file.exists() else {}
        if not isinstance(self.config, dict):
            raise ValueError(f"{config_file}: must hold a JSON object, got {type(self.config).__name__}")
        index = self.path / INDEX
        weight_map = None
        if index.exists():
            files, weight_map = _index_files(self.path, index)
        else:
            files = sorted(self.path.glob("*.safetensors"))
        if not files:
            raise ValueError(f"checkpoint {str(self.path)!r} has no *.safetensors file")
        self.tensors: dict[str, TensorInfo] = {}
        for file in files:
            if not file.exists():
                raise ValueError(f"{index}: names the file {file.name!r}, which is missing")
            for name, info in read_header(file).items():
                if name in self.tensors:
                    raise ValueError(f"tensor {name!r} is in both {self.tensors[name].file.name} and {file.name}")
                self.tensors[name] = info
        if weight_map is not None:
            for name, file in weight_map.items():
                info = self.tensors.get(name)
                if info is None or info.file.name != file:
                    where = "lacks it" if info is None else f"does not hold it (it is in {info.file.name})"
                    raise ValueError(f"{index}: weight_map puts tensor {name!r} in {file}, whose header {where}")

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def tensor(self, name: str, rows: tuple[int, int] | None = None,
               cols: tuple[int, int] | None = None) -> torch.Tensor:
        """One tensor, read from its file into a CPU tensor of its own (host memory: its bytes).

        ``rows`` / ``cols`` (``(start, end)``, 2-D tensors only) read just that block: rows of a
        row-major tensor are one contiguous byte range, a range of columns one range per row; no
        other byte of the tensor is read.
        """
        if not isinstance(name, str):
            raise TypeError(f"name must be a tensor name (str), got {type(name).__name__}")
        info = self.tensors.get(name)
        if info is None:
            raise ValueError(f"checkpoint {str(self.path)!r} has no tensor {name!r} (its names: Checkpoint.tensors)")
        dtype = info.torch_dtype
        if dtype is None:
            raise ValueError(f"checkpoint tensor {name!r} is {info.dtype}, which this torch cannot hold")
        if rows is None and cols is None:
            buf = torch.empty(info.nbytes, dtype=torch.uint8)
            with open(info.file, "rb") as f:
                _read_into(f, info.offset, buf, info, name)
            return buf.view(dtype).reshape(info.shape)
        if len(info.shape) != 2:
            raise ValueError(f"checkpoint tensor {name!r} has shape {list(info.shape)}: rows= / cols= need a 2-D "
                             "tensor")
        (r0, r1), (c0, c1) = [_span(span, size, what, name) for span, size, what in
                              ((rows, info.shape[0], "rows"), (cols, info.shape[1], "cols"))]
        item = DTYPES[info.dtype][1]
        row_bytes = info.shape[1] * item
        buf = torch.empty((r1 - r0, (c1 - c0) * item), dtype=torch.uint8)
        with open(info.file, "rb") as f:
            if (c0, c1) == (0, info.shape[1]):
                _read_into(f, info.offset + r0 * row_bytes, buf, info, name)
            else:
                for i, r in enumerate(range(r0, r1)):
                    _read_into(f, info.offset + r * row_bytes + c0 * item, buf[i], info, name)
        return buf.view(dtype)

    def check(self, name: str, dtypes: tuple[str, ...], shape: tuple[int, ...], rule: str) -> TensorInfo:
        """The tensor's header, or ValueError naming ``name`` and ``rule`` unless it exists with one of
        ``dtypes`` and ``shape``."""
        info = self.tensors.get(name)
        if info is None:
            raise ValueError(f"checkpoint tensor {name!r} is missing ({rule})")
        if info.dtype not in dtypes:
            raise ValueError(f"checkpoint tensor {name!r} is {info.dtype}, must be {' or '.join(dtypes)} ({rule})")
        if info.shape != tuple(shape):
            raise ValueError(f"checkpoint tensor {name!r} has shape {list(info.shape)}, must be {list(shape)} ({rule})")
        return info

    def mxfp4_weight(self, prefix: str, n: int, k: int, rows: tuple[int, int] | None = None,
                     cols: tuple[int, int] | None = None) -> MXFP4Tensor:
        """The Quark weight ``<prefix>.weight`` / ``.weight_scale`` of an [n, k] layer, plain layout; with
        ``rows`` (of N) or ``cols`` (of K, on 32-element block boundaries) only that block of the weight
        and its scales is read (a tensor-parallel shard)."""
        self.check(f"{prefix}.weight", ("U8",), (n, k // 2), "Quark MXFP4 weight: uint8 [N, K/2]")
        self.check(f"{prefix}.weight_scale", SCALE_DTYPES, (n, k // BLOCK), "Quark MXFP4 scales: e8m0 [N, K/32]")
        r0, r1 = rows if rows is not None else (0, n)
        c0, c1 = cols if cols is not None else (0, k)
        if c0 % BLOCK or (c1 % BLOCK and c1 != k):
            raise ValueError(f"cols ({c0}, {c1}) of {prefix!r} must lie on {BLOCK}-element block boundaries")
        whole = rows is None and cols is None
        spans = {} if whole else {"rows": (r0, r1)}
        data = self.tensor(f"{prefix}.weight", **spans, **({} if whole else {"cols": (c0 // 2, c1 // 2)}))
        scales = self.tensor(f"{prefix}.weight_scale", **spans,
                             **({} if whole else {"cols": (c0 // BLOCK, c1 // BLOCK)})).view(torch.uint8)
        return MXFP4Tensor(data, scales, (r1 - r0, c1 - c0), Layout.PLAIN, ScaleRule.AITER)


def _span(span: tuple[int, int] | None, size: int, what: str, name: str) -> tuple[int, int]:
    if span is None:
        return 0, size
    if (not isinstance(span, tuple) or len(span) != 2 or not all(type(v) is int for v in span)
            or not 0 <= span[0] <= span[1] <= size):
        raise ValueError(f"{what}={span!r} for tensor {name!r} must be (start, end) with 0 <= start <= end <= {size}")
    return span


def _read_into(f, offset: int, buf: torch.Tensor, info: TensorInfo, name: str) -> None:
    """Reads ``buf.numel()`` bytes at ``offset`` of the open file ``f`` into the contiguous uint8 ``buf``."""
    f.seek(offset)
    got = f.readinto(memoryview(buf.numpy()).cast("B")) if buf.numel() else 0
    if got != buf.numel():
        raise ValueError(f"{info.file}: truncated while reading tensor {name!r} ({got} of {buf.numel()} bytes at "
                         f"byte {offset})")


def load(path: str | pathlib.Path) -> Checkpoint:
    """Opens a safetensors checkpoint directory lazily (headers only); see :class:`Checkpoint`."""
    return Checkpoint(path)


def parse_size(size: int | str) -> int:
    """Bytes of ``size``: an int, or a string such as "5GB" (10**9) or "500MiB" (2**20)."""
    if isinstance(size, int) and not isinstance(size, bool):
        value = size
    elif isinstance(size, str):
        units = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                 "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
        text = size.strip().upper()
        unit = next((u for u in sorted(units, key=len, reverse=True) if text.endswith(u)), None)
        try:
            number = float(text[: -len(unit)]) * units[unit] if unit else int(text)
            value = int(number) if math.isfinite(number) else -1
        except ValueError:
            value = -1
    else:
        value = -1
    if value <= 0:
        raise ValueError(f"max_shard_size must be a positive number of bytes or a string like '5GB', got {size!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Entry:
    """A tensor to write: its name, safetensors dtype and shape, and how to make it (on the CPU) when its
    turn comes, so that only one tensor exists on the host at a time."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    make: object  # () -> torch.Tensor

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPES[self.dtype][1]


def write_shards(path: pathlib.Path, entries: list[Entry], max_shard_size: int) -> list[pathlib.Path]:
    """Writes ``entries`` in order into shards of at most ``max_shard_size`` bytes of data each (a larger
    tensor gets a shard of its own): ``model.safetensors`` when one suffices, else
    ``model-0000k-of-0000n.safetensors`` and ``model.safetensors.index.json``. Returns the files."""
    shards: list[list[Entry]] = [[]]
    for e in entries:
        if shards[-1] and sum(x.nbytes for x in shards[-1]) + e.nbytes > max_shard_size:
            shards.append([])
        shards[-1].append(e)
    for old in [*path.glob("model*.safetensors"), path / INDEX]:  # a previous save's files would be read too
        old.unlink(missing_ok=True)
    names = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    for name, shard in zip(names, shards):
        _write_file(path / name, shard)
    if len(shards) > 1:
        index = {"metadata": {"total_size": sum(e.nbytes for e in entries)},
                 "weight_map": {e.name: name for name, shard in zip(names, shards) for e in shard}}
        (path / INDEX).write_text(json.dumps(index, indent=2) + "\n")
    return [path / n for n in names]


def _write_file(file: pathlib.Path, entries: list[Entry]) -> None:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for e in entries:
        header[e.name] = {"dtype": e.dtype, "shape": list(e.shape), "data_offsets": [offset, offset + e.nbytes]}
        offset += e.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for e in entries:
            t = e.make()
            if NAMES.get(t.dtype) != e.dtype or tuple(t.shape) != e.shape:
                raise ValueError(f"tensor {e.name!r} came out {t.dtype} {list(t.shape)}, its header says "
                                 f"{e.dtype} {list(e.shape)}")
            if t.numel():
                f.write(memoryview(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()))
