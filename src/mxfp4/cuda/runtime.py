"""Loads the compiled kernels on a GPU and launches them on PyTorch's current stream (cuda.core)."""
from __future__ import annotations

import threading

import numpy as np
import torch

from ..plan import SEGMENT_BLOCKS

PREP_THREADS = 1024
"""Threads of a large-M prep CTA (PREP_THREADS in gemm_wgmma.cu)."""
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


def config(grid: tuple[int, int, int], block: int, smem_bytes: int, cluster: tuple[int, int, int] | None):
    """A cuda.core launch configuration; ``grid`` counts CTAs (not clusters)."""
    core = _core()
    if cluster is None:
        return core.LaunchConfig(grid=grid, block=block, shmem_size=smem_bytes)
    grid = tuple(g // c for g, c in zip(grid, cluster))
    return core.LaunchConfig(grid=grid, cluster=cluster, block=block, shmem_size=smem_bytes)


_gemm: dict[tuple, tuple] = {}  # (params, grid, device index) -> (kernel, launch config)


def gemm_launch(params, tiles: tuple[int, int], device: torch.device):
    """The GEMM kernel of ``params`` and its launch configuration for ``tiles`` (N tiles, M tiles).

    Both are looked up once per parameter set, tile count and device (a shape, never a tensor), so
    an eager call does no compilation-cache or configuration work.
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (params, tiles, index)
    hit = _gemm.get(key)
    if hit is None:
        smem = params.smem_bytes()
        k = kernel(params.source, "mxfp4_gemm_a4w4", params.defines(), device, smem)
        hit = _gemm[key] = (k, config((*tiles, params.split), params.threads, smem, (1, 1, params.split)))
    return hit


_wgmma: dict[tuple, tuple] = {}  # (params, token tiles, n, k, device index) -> (prep, config, gemm, config, geometry)


def wgmma_launch(params, m: int, n: int, k: int, device: torch.device):
    """The large-M kernels of ``params`` (prep and GEMM) and their launch configurations for a shape,
    looked up once per parameter set, token-tile count (M enters only through it), N, K and device."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (params, -(-m // params.tn), n, k, index)
    hit = _wgmma.get(key)
    if hit is None:
        defines = params.defines()
        smem = params.smem_bytes()
        prep = kernel(params.source, "mxfp4_wgmma_prep", defines, device)
        gemm = kernel(params.source, params.gemm_name, defines, device, smem)
        g = wgmma_geometry(params, m, n, k)
        hit = _wgmma[key] = (prep, config((g["a_ctas"] + g["w_ctas"], 1, 1), PREP_THREADS, 0, None),
                             gemm, config((g["ntile"] * g["nwt"], 1, 1), 384, smem, None), g)
    return hit


def weight_map(data: torch.Tensor, k: int):
    """TMA tensor map over the shuffled weight's codes as 16-row groups of k 8-byte words; a box is
    8 groups x 256 words (a segment: 8 blocks of 32 elements). Built per call from the tensor as
    given (nothing is kept)."""
    from cuda.core.utils import StridedMemoryView

    groups = data.view(torch.int64).view(data.shape[0] // 16, k)
    view = StridedMemoryView.from_dlpack(groups, stream_ptr=-1)
    return view.as_tensor_map(box_dim=(8, 32 * SEGMENT_BLOCKS))


def wgmma_geometry(params, m: int, n: int, k: int) -> dict[str, int]:
    """Sizes of the large-M kernel's workspace and grids for C [m, n] = A [m, k] W [n, k]^T."""
    nseg = -(-(k // 32) // SEGMENT_BLOCKS)
    ntile = -(-m // params.tn)
    nwt = -(-n // 128)
    ablob = nseg * ntile * params.ablob_bytes
    w_ctas = nwt * nseg if params.int8_weight else nwt * -(-nseg // (PREP_THREADS // 128))
    return dict(nseg=nseg, ntile=ntile, nwt=nwt, ablob=ablob, wmeta=nwt * nseg * params.wmeta_bytes,
                a_ctas=nseg * ntile, w_ctas=w_ctas)


def launch(k, cfg, device: torch.device, *args) -> None:
    """Launches ``k`` with configuration ``cfg`` on the current stream of ``device``."""
    _core().launch(_stream(device), cfg, k, *args)


def i32(v: int) -> np.int32:
    return np.int32(v)
