"""The model benchmark from a checkpoint: ``mxfp4 bench-model --make-checkpoint DIR`` then ``--checkpoint DIR``.

``make``: the benchmark decoder (:mod:`mxfp4.bench.llama`, random bf16 weights, seed 0) built on the
device, quantized in memory (:func:`mxfp4.quantize_`), written by :func:`mxfp4.save` in 1 GB shards
with its shape and the sha256 of its state_dict under ``config.json``'s ``mxfp4_bench``. No network
or download is needed. ``load``: the decoder built on the meta device and loaded by
``quantize_(model, checkpoint=DIR, device=...)``, so its bf16 weights never exist; reports the load
time, the host's peak RSS above the process's, the device's peak, and whether the loaded state_dict
is, byte for byte, the in-memory quantized model's.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import time

import torch

from .. import checkpoint as ckpt_mod
from ..convert import quantize_
from . import llama


def state_digest(model: torch.nn.Module) -> str:
    """sha256 over the state_dict's names, dtypes, shapes and bytes, in order."""
    h = hashlib.sha256()
    for key, t in model.state_dict().items():
        h.update(f"{key} {t.dtype} {list(t.shape)}\n".encode())
        if t.numel():
            h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes())
    return h.hexdigest()


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM back to the current RSS
        return True
    except OSError:
        return False


def make(shape: llama.LlamaShape, path: str | pathlib.Path, device: str, progress=print) -> str:
    """Writes the quantized benchmark decoder to ``path``; returns a one-line summary."""
    dev = torch.device(device)
    start = time.perf_counter()
    model = llama.build(shape, 1, dev)
    bf16 = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    quantize_(model)
    progress(f"built and quantized in memory ({bf16 / 2**30:.2f} GiB in bf16) in {time.perf_counter() - start:.1f} s")
    digest = state_digest(model)
    start = time.perf_counter()
    path = ckpt_mod.save(model, path, {"mxfp4_bench": {"shape": dataclasses.asdict(shape), "state_sha256": digest}},
                         max_shard_size="1GB")
    files = sorted(path.glob("*.safetensors"))
    size = sum(f.stat().st_size for f in files)
    return (f"wrote {path}: {size / 2**30:.2f} GiB in {len(files)} files in {time.perf_counter() - start:.1f} s "
            f"(the bf16 model: {bf16 / 2**30:.2f} GiB)")


def load(path: str | pathlib.Path, batch: int, max_seq: int, device: str) -> tuple[llama.Decoder, str]:
    """(the decoder built on meta and loaded from ``path`` onto ``device``, a report line)."""
    ckpt = ckpt_mod.load(path)
    bench = ckpt.config.get("mxfp4_bench")
    if not isinstance(bench, dict) or "shape" not in bench:
        raise ValueError(f"{path}/config.json: no mxfp4_bench.shape (write the checkpoint with "
                         "mxfp4 bench-model --make-checkpoint DIR)")
    shape = dataclasses.replace(llama.LlamaShape(**bench["shape"]), max_seq=max_seq)
    dev = torch.device(device)
    with torch.device("meta"):
        model = llama.Decoder(shape, batch)
    model = model.to(torch.bfloat16).eval().requires_grad_(False)
    base = _status("VmRSS:")
    peak_ok = _reset_peak_rss()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    start = time.perf_counter()
    quantize_(model, checkpoint=ckpt, device=dev)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM:") if peak_ok else None
    files = {i.file for i in ckpt.tensors.values()}
    size = sum(f.stat().st_size for f in files)
    largest = max(i.nbytes for i in ckpt.tensors.values())
    same = state_digest(model) == bench.get("state_sha256")
    host = f"host peak RSS +{(peak - base) / 2**20:.0f} MiB over the process's" if peak and base else "host peak n/a"
    device_peak = (f", device peak {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB" if dev.type == "cuda"
                   else "")
    line = (f"checkpoint {path}: {size / 2**30:.2f} GiB in {len(files)} files, {len(ckpt.tensors)} tensors "
            f"(largest {largest / 2**20:.0f} MiB), model built on meta and loaded onto {dev} in {seconds:.1f} s; "
            f"{host}{device_peak}; state_dict byte-identical to the in-memory quantized model's: {same}")
    return model, line
