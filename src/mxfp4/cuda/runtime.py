"""Loads the compiled kernels on a GPU and launches them on PyTorch's current stream (cuda.core)."""
from __future__ import annotations

import threading

import numpy as np
import torch

from . import jit

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}  # (source, name, defines, device index) -> cuda.core Kernel
_streams: dict[tuple[int, int], object] = {}  # (device index, stream handle) -> cuda.core Stream view


def _core():
    try:
        import cuda.core as core
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the CUDA kernels need cuda-core: pip install 'cuda-core[cu13]'") from e
    return core


def kernel(source: str, name: str, defines: dict[str, int] | None, device: torch.device, smem_bytes: int = 0):
    """The kernel ``name`` of ``csrc/<source>`` built with ``defines``, loaded on ``device``.

    Compiled (or read from the disk cache) and loaded once per process and device; ``smem_bytes``
    above 48 KiB is allowed on the kernel as it loads.
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (source, name, tuple(sorted((defines or {}).items())), index)
    k = _kernels.get(key)
    if k is not None:
        return k
    with _lock:
        k = _kernels.get(key)
        if k is None:
            core = _core()
            cubin = jit.compile_cubin(source, defines)
            core.Device(index).set_current()
            k = core.ObjectCode.from_cubin(cubin).get_kernel(name)
            if smem_bytes > 48 * 1024:
                from cuda.bindings import driver

                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                err, = driver.cuKernelSetAttribute(attr, smem_bytes, k.handle, index)
                if err != driver.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"cannot allow {smem_bytes} bytes of shared memory on {name}: {err}")
            _kernels[key] = k
    return k


def _stream(device: torch.device):
    handle = torch.cuda.current_stream(device).cuda_stream
    key = (device.index, handle)
    s = _streams.get(key)
    if s is None:
        s = _streams[key] = _core().Stream.from_handle(handle)
    return s


def launch(k, device: torch.device, grid: tuple[int, int, int], block: int, smem_bytes: int,
           cluster: tuple[int, int, int] | None, dependent: bool, *args) -> None:
    """Launches ``k`` on the current stream of ``device``; ``grid`` counts CTAs (not clusters).

    ``dependent``: a programmatic dependent launch; it may start before the previous kernel on
    the stream ends, and waits for it where the kernel says (``griddepcontrol.wait``).
    """
    core = _core()
    extra = {"programmatic_stream_serialization": True} if dependent else {}
    if cluster is not None:
        grid = tuple(g // c for g, c in zip(grid, cluster))
        config = core.LaunchConfig(grid=grid, cluster=cluster, block=block, shmem_size=smem_bytes, **extra)
    else:
        config = core.LaunchConfig(grid=grid, block=block, shmem_size=smem_bytes, **extra)
    core.launch(_stream(device), config, k, *args)


def i32(v: int) -> np.int32:
    return np.int32(v)
