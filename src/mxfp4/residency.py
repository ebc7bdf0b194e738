"""What runs at once on the device: its SM count, how many programs of a compiled kernel an SM
holds, the per-stream counter workspace of the launches that meet or sum split-K partials, and
whether Triton's CPU interpreter (programs one after another) stands in for the GPU."""
from __future__ import annotations

import ctypes
import os

import torch


def interpreter_enabled() -> bool:
    """True when TRITON_INTERPRET asks for Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class _Workspace:
    """Launch counters per (device, stream), zero when first made. Slot 0: the epoch; 1, 2: the
    phase-1 meeting counters (alternating with the epoch); from 4: split-K tile counters, their
    count reset by the last program of the tile to arrive (which may also flip their bit 16:
    ``kernels.a4w4._store_tile``). Launches on one stream are ordered, so they never overlap (the
    int8 path's multiply may start before its own A fold ends, but the fold uses no counters)."""

    def __init__(self) -> None:
        self._counters: dict[tuple, torch.Tensor] = {}

    def counters(self, device: torch.device, count: int) -> torch.Tensor:
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        key = (device.type, device.index, stream)
        buf = self._counters.get(key)
        if buf is None or buf.numel() < count:
            buf = torch.zeros(max(count, 4096), dtype=torch.int32, device=device)
            self._counters[key] = buf
        return buf


_WORKSPACE = _Workspace()
_DEVICE_FACTS: dict[int, tuple[str, int]] = {}


def on_gpu(device: torch.device) -> bool:
    """Whether launches on ``device`` run on a CUDA GPU (not under the CPU interpreter)."""
    return device.type == "cuda" and not interpreter_enabled()


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def device_facts(device: torch.device) -> tuple[str, int]:
    """(GPU model name, SM count) of a CUDA device, queried once per device."""
    idx = _device_index(device)
    if idx not in _DEVICE_FACTS:
        props = torch.cuda.get_device_properties(idx)
        _DEVICE_FACTS[idx] = (props.name, props.multi_processor_count)
    return _DEVICE_FACTS[idx]


def programmatic_launch(device: torch.device) -> bool:
    """Whether a launch on ``device`` may be a programmatic dependent of the one before it
    (griddepcontrol, sm_90 and later; not under the interpreter)."""
    return on_gpu(device) and torch.cuda.get_device_capability(_device_index(device))[0] >= 9


def num_programs_cap(device: torch.device) -> int:
    """Programs that are surely co-resident: one per SM on CUDA; a few under the interpreter."""
    return device_facts(device)[1] if device.type == "cuda" else 8


_RESIDENT: dict = {}  # resident_per_sm's answers: facts of the driver about compiled kernels


def resident_per_sm(kernel, args: tuple, consts: dict, key: tuple) -> int:
    """Programs of ``kernel``, compiled for these arguments, that can be resident on one SM at
    once (the driver's cuOccupancyMaxActiveBlocksPerMultiprocessor, for its registers, shared
    memory and threads), cached under ``key``; 1 where the driver cannot be asked, which keeps a
    co-resident grid safe."""
    if key not in _RESIDENT:
        per_sm = 1
        try:
            compiled = kernel.warmup(*args, grid=(1,), **consts)  # compiles (and caches) without launching
            compiled._init_handles()
            blocks = ctypes.c_int(0)
            status = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), ctypes.c_void_p(compiled.function), ctypes.c_int(32 * consts["num_warps"]),
                ctypes.c_size_t(compiled.metadata.shared))
            if status == 0:
                per_sm = max(1, blocks.value)
        except (OSError, AttributeError, TypeError):  # no libcuda, or another triton's CompiledKernel
            per_sm = 1
        _RESIDENT[key] = per_sm
    return _RESIDENT[key]
