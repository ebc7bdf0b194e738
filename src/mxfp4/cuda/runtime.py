"""Loads the compiled kernels on a GPU and launches them on PyTorch's current stream.

Kernels load through cuda.core (once per kernel and device). Launches go straight to the driver:
``cuLaunchKernelEx`` through ctypes, with the launch configuration built once per shape and the
arguments packed by one ``struct`` call into a reusable buffer. cuda.core's per-call launch
objects, its stream wrapper and ``torch.cuda.current_stream()`` were most of the 44-49 us of host
time a small-M call took at e77225e on the H200; this path is a ctypes call and a few hundred
nanoseconds of packing. Each kernel has a typed :class:`Signature`, which lays out its argument buffer;
what each GEMM family launches, and with which arguments, is :mod:`mxfp4.cuda.launch`'s.
"""
from __future__ import annotations

import ctypes
import enum
import struct
import threading

import torch

from . import jit

_lock = threading.Lock()  # loading a kernel
_launch_lock = threading.Lock()  # a launch's shared argument buffer and config stream field (not held while loading)
_kernels: dict[tuple, "Kernel"] = {}  # (source, name, defines, device index) -> Kernel


def _core():
    try:
        import cuda.core as core
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the CUDA kernels need cuda-core: pip install 'cuda-core[cu13]'") from e
    return core


# ---- the driver entry points, by ctypes ------------------------------------------------------------

class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union (72 bytes)."""

    _fields_ = [("id", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("value", ctypes.c_uint32 * 16)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (56 bytes; the offsets are checked against cuda.bindings' in the tests)."""

    _fields_ = [("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3), ("shmem", ctypes.c_uint32),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint32)]


_CLUSTER_DIMENSION = 4   # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
_driver_lib = None


def _driver():
    """libcuda's cuLaunchKernelEx, loaded once."""
    global _driver_lib
    if _driver_lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuLaunchKernelEx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.cuLaunchKernelEx.restype = ctypes.c_int
        lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _driver_lib = lib
    return _driver_lib


def _error(rc: int, what: str) -> RuntimeError:
    name = ctypes.c_char_p()
    _driver().cuGetErrorName(rc, ctypes.byref(name))
    return RuntimeError(f"{what}: {name.value.decode() if name.value else rc}")


# ---- kernels and launch configurations -------------------------------------------------------------

class Param(enum.Enum):
    """A kind of kernel parameter: the C type of a prototype, its declaration in NVRTC's PTX (which
    tests/test_launch.py compares with every shipped kernel's) and its slot's ``struct`` format in the
    argument buffer. A scalar fills an 8-byte slot, of which the driver copies the parameter's own size
    (an int32 its low 4 bytes)."""

    PTR = ("T *", ".u64", "Q")
    I64 = ("long long", ".u64", "q")
    I32 = ("int", ".u32", "i4x")

    def __init__(self, c_type: str, ptx: str, fmt: str) -> None:
        self.c_type, self.ptx, self.fmt = c_type, ptx, fmt


class Signature:
    """A kernel's name and its parameters in the prototype's order, each a name (the prototype's) and a
    :class:`Param`: ``Signature("mxfp4_quantize", A=Param.PTR, lda=Param.I32, ...)``."""

    __slots__ = ("name", "names", "kinds")

    def __init__(self, name: str, **params: Param) -> None:
        self.name, self.names, self.kinds = name, tuple(params), tuple(params.values())

    @property
    def ptx(self) -> tuple[str, ...]:
        """The parameters' declarations as :func:`jit.entry_params` reads them from the kernel's PTX."""
        return tuple(kind.ptx for kind in self.kinds)

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(f'{k.c_type} {n}' for n, k in zip(self.names, self.kinds))})"


class Kernel:
    """A kernel loaded on one device: its signature, its CUfunction, for ``cuLaunchKernelEx``, and the
    argument buffer laid out for the signature."""

    __slots__ = ("name", "signature", "function", "module", "packer")

    def __init__(self, signature: Signature, function: int, module) -> None:
        self.name, self.signature = signature.name, signature
        self.function, self.module = function, module  # module: keeps the code loaded
        self.packer = _Packer(signature.kinds)


def kernel(source: str, signature: Signature, defines: dict[str, int] | None, device: torch.device,
           smem_bytes: int = 0) -> Kernel:
    """The kernel ``signature.name`` of ``csrc/<source>`` built with ``defines``, loaded on ``device``.

    Compiled (or read from the disk cache) and loaded once per process and device; ``smem_bytes``
    above 48 KiB is allowed on the kernel as it loads.
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    name = signature.name
    key = (source, name, tuple(sorted((defines or {}).items())), index)
    k = _kernels.get(key)
    if k is not None:
        return k
    with _lock:
        k = _kernels.get(key)
        if k is None:
            from cuda.bindings import driver

            core = _core()
            cubin = jit.compile_cubin(source, defines)
            core.Device(index).set_current()
            module = core.ObjectCode.from_cubin(cubin)
            handle = module.get_kernel(name).handle
            if smem_bytes > 48 * 1024:
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                err, = driver.cuKernelSetAttribute(attr, smem_bytes, handle, index)
                if err != driver.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"cannot allow {smem_bytes} bytes of shared memory on {name}: {err}")
            err, function = driver.cuKernelGetFunction(handle)  # in the current (primary) context
            if err != driver.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cannot get the function of {name}: {err}")
            k = _kernels[key] = Kernel(signature, int(function), module)
    return k


class LaunchConfig:
    """A launch's grid, block, dynamic shared memory, cluster and whether it may start before the
    previous kernel on its stream ends, as the driver's struct (built once)."""

    __slots__ = ("struct", "address", "_attrs", "grid", "cluster")

    def __init__(self, grid: tuple[int, int, int], block: int, smem_bytes: int,
                 cluster: tuple[int, int, int] | None, dependent: bool = False) -> None:
        self.grid, self.cluster = grid, cluster
        c = self.struct = _LaunchConfig()
        self.address = ctypes.addressof(c)
        c.grid[:] = grid  # the driver counts blocks, a multiple of the cluster's (cuda.core counted clusters)
        c.block[:] = (block, 1, 1)
        c.shmem = smem_bytes
        attrs = []
        if cluster is not None:
            attrs.append((_CLUSTER_DIMENSION, cluster))
        if dependent:  # programmatic dependent launch: the kernel waits (griddepcontrol.wait) itself
            attrs.append((_PROGRAMMATIC_STREAM_SERIALIZATION, (1,)))
        self._attrs = (_LaunchAttribute * max(len(attrs), 1))()
        for a, (key, value) in zip(self._attrs, attrs):
            a.id = key
            a.value[:len(value)] = value
        c.attrs = ctypes.addressof(self._attrs) if attrs else None
        c.num_attrs = len(attrs)


def config(grid: tuple[int, int, int], block: int, smem_bytes: int,
           cluster: tuple[int, int, int] | None, dependent: bool = False) -> LaunchConfig:
    """A launch configuration; ``grid`` counts CTAs (not clusters). ``dependent``: the kernel may
    start while the previous one on the stream runs (programmatic dependent launch); it must execute
    ``griddepcontrol.wait`` before it reads what that kernel writes."""
    return LaunchConfig(grid, block, smem_bytes, cluster, dependent)


# ---- arguments -------------------------------------------------------------------------------------

class _Packer:
    """The argument buffer of one signature (the :class:`Param` of each argument, in order): one ``struct``
    format, an 8-byte slot a parameter, and the array of slot addresses that ``cuLaunchKernelEx`` reads."""

    def __init__(self, kinds: tuple[Param, ...]) -> None:
        self.struct = struct.Struct("<" + "".join(kind.fmt for kind in kinds))
        self.count = len(kinds)
        self._buf = ctypes.create_string_buffer(8 * len(kinds) + 64)
        base = (ctypes.addressof(self._buf) + 63) & ~63
        self.base = base
        self.buffer = (ctypes.c_char * (8 * len(kinds) + 1)).from_address(base)
        self.params = (ctypes.c_void_p * max(1, len(kinds)))(*(base + 8 * i for i in range(len(kinds))))
        self.params_address = ctypes.addressof(self.params)

    def pack(self, args) -> None:
        self.struct.pack_into(self.buffer, 0, *args)


def launch(k: Kernel, cfg: LaunchConfig, device: torch.device, *args) -> None:
    """Launches ``k`` with ``cfg`` on the current stream of ``device``; ``args`` in its signature's order:
    pointers and integers as ``int``, each in its parameter's range."""
    packer = k.packer
    if len(args) != packer.count:
        raise TypeError(f"{k.signature} takes {packer.count} arguments, got {len(args)}")
    stream = torch._C._cuda_getCurrentRawStream(device.index)
    with _launch_lock:  # the buffer and the config's stream field are shared by every thread
        try:
            packer.pack(args)
        except struct.error as e:  # a value out of its parameter's range, or not an integer
            raise TypeError(f"{k.signature}: {e}: {args}") from None
        cfg.struct.stream = stream
        rc = _driver().cuLaunchKernelEx(cfg.address, k.function, packer.params_address, None)
    if rc:
        raise _error(rc, f"launching {k.name} (grid {cfg.grid}, cluster {cfg.cluster})")


# ---- kernel attributes -----------------------------------------------------------------------------

def prefer_shared(k: Kernel) -> None:
    """The largest shared-memory carveout for ``k``, the one the GEMM that depends on it needs: an SM
    runs CTAs of both kernels side by side only in one configuration."""
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    err, = driver.cuFuncSetAttribute(driver.CUfunction(k.function), attr, 100)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot prefer the largest shared memory carveout for {k.name}: {err}")


def allow_large_cluster(k: Kernel) -> None:
    """Clusters of 9..16 CTAs (non-portable on Hopper) for ``k``."""
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    err, = driver.cuFuncSetAttribute(driver.CUfunction(k.function), attr, 1)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot allow clusters above 8 CTAs on {k.name}: {err}")
