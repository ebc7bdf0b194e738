"""Compiles the CUDA C++ kernels with NVRTC for sm_90a and keeps the cubins in a disk cache.

Compiling needs only the pip packages ``cuda-bindings`` and ``nvidia-cuda-nvrtc``: no GPU, no
driver and no CUDA toolkit (CI compiles every shipped variant this way). A cubin is stored under
``$MXFP4_CACHE_DIR`` (default ``~/.cache/mxfp4``) by the SHA-256 of the source and the headers it
includes, the options, the architecture and NVRTC's version, so an edit or an upgrade compiles anew and
nothing stale loads.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import tempfile

CSRC = pathlib.Path(__file__).with_name("csrc")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([\w.]+)"', re.M)
ARCH = "sm_90a"
BASE_OPTIONS = ("-std=c++17", "-default-device", "--ftz=false", "--prec-div=true", "-lineinfo")


class CompileError(RuntimeError):
    """NVRTC rejected a kernel source, or ptxas serialized its wgmma; the message holds its log."""


SERIALIZED_WGMMA = "wgmma.mma_async instructions are serialized"
"""ptxas's note (C7519/C7520) that it made every wgmma of a kernel wait for the one before, e.g.
for a branch around wgmma on a value it cannot prove warp-uniform: treated as a compile error."""


def cache_dir() -> pathlib.Path:
    root = os.environ.get("MXFP4_CACHE_DIR")
    if root:
        return pathlib.Path(root)
    return pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "mxfp4"


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the CUDA kernels need the pip packages cuda-core and cuda-bindings with NVRTC: "
            "pip install 'cuda-core[cu13]'"
        ) from e
    return nvrtc


def _log(prog) -> str:
    nvrtc = _nvrtc()
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if size <= 1:  # only the terminator; and b" " * 1 is CPython's shared one-byte object, which
        return ""  # NVRTC would overwrite for the whole process
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace")


def _check(result, prog=None):
    nvrtc = _nvrtc()
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _log(prog) if prog is not None else ""
        raise CompileError(f"NVRTC: {nvrtc.nvrtcGetErrorString(err)[1].decode()}\n{log}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def nvrtc_version() -> tuple[int, int]:
    major, minor = _check(_nvrtc().nvrtcVersion())
    return int(major), int(minor)


def headers(source: str) -> tuple[str, ...]:
    """The csrc headers that ``source`` (a source's text) includes, directly or through another header,
    each once, in the order they are first named (a header under an #if counts: the key may cover more
    than a build reads, never less)."""
    found: list[str] = []

    def walk(text: str) -> None:
        for name in _INCLUDE.findall(text):
            if name not in found:
                found.append(name)
                walk((CSRC / name).read_text())

    walk(source)
    return tuple(found)


def _key(source: str, options: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for name in headers(source):
        h.update((CSRC / name).read_bytes())
    h.update(source.encode())
    h.update("\0".join(options).encode())
    h.update(f"{ARCH} nvrtc {nvrtc_version()}".encode())
    return h.hexdigest()[:32]


def _options(defines: dict[str, int] | None) -> tuple[str, ...]:
    return BASE_OPTIONS + (f"-arch={ARCH}",) + tuple(f"-D{k}={int(v)}" for k, v in sorted((defines or {}).items()))


def _compiled(source_name: str, source: str, options: tuple[str, ...], read) -> bytes:
    """NVRTC's output of ``source`` (``read(nvrtc, prog)``: the cubin's or the PTX's bytes)."""
    nvrtc = _nvrtc()
    names = headers(source)
    texts = [(CSRC / n).read_bytes() for n in names]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), source_name.encode(), len(texts), texts,
                                           [n.encode() for n in names]))
    try:
        opts = [o.encode() for o in options]
        _check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), prog)
        log = _log(prog)
        if SERIALIZED_WGMMA in log:  # a kernel that runs, slowly: never cached, never shipped
            raise CompileError(f"ptxas serialized the wgmma of {source_name} {options}:\n{log}")
        return read(nvrtc, prog)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _cubin(nvrtc, prog) -> bytes:
    size = _check(nvrtc.nvrtcGetCUBINSize(prog))
    cubin = b" " * size
    _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
    return cubin


def _ptx(nvrtc, prog) -> bytes:
    size = _check(nvrtc.nvrtcGetPTXSize(prog))
    ptx = b" " * size
    _check(nvrtc.nvrtcGetPTX(prog, ptx))
    return ptx


def compile_cubin(source_name: str, defines: dict[str, int] | None = None) -> bytes:
    """The sm_90a cubin of ``csrc/<source_name>`` with ``-D`` defines, from the cache or NVRTC."""
    source, options, path = _target(source_name, defines)
    try:
        return path.read_bytes()
    except OSError:
        return _build(source_name, source, options, path)[0]


def entry_params(source_name: str, defines: dict[str, int] | None = None) -> dict[str, tuple[str, ...]]:
    """Every kernel of ``csrc/<source_name>`` built with ``defines``, by name: its parameters' declarations
    in order, as NVRTC's PTX states them without their names (``.u64``, ``.u32``, ``.align 64 .b8 [128]``),
    the prototype a launch's arguments must match (``runtime.Param``). Compiled anew, with the options of
    :func:`compile_cubin`, whose cache the compile's cubin goes to."""
    ptx = _build(source_name, *_target(source_name, defines))[1]
    return {name: tuple(" ".join(re.sub(rf"{name}_param_\d+", " ", d).split()).removeprefix(".param ")
                        for d in params.split(",") if d.strip())
            for name, params in re.findall(r"\.entry (\w+)\(([^)]*)\)", ptx)}


def _target(source_name: str, defines: dict[str, int] | None) -> tuple[str, tuple[str, ...], pathlib.Path]:
    """The source text, NVRTC's options and the cache file of ``csrc/<source_name>`` with ``defines``."""
    source = (CSRC / source_name).read_text()
    options = _options(defines)
    return source, options, cache_dir() / f"{pathlib.Path(source_name).stem}-{_key(source, options)}.cubin"


def _build(source_name: str, source: str, options: tuple[str, ...], path: pathlib.Path) -> tuple[bytes, str]:
    """NVRTC's cubin and PTX of one compile; the cubin is stored at ``path``."""
    cubin, ptx = _compiled(source_name, source, options, lambda nvrtc, prog: (_cubin(nvrtc, prog), _ptx(nvrtc, prog)))
    try:  # atomic: a reader sees a whole file or none
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs a compile next time
    return cubin, ptx.decode(errors="replace")


def exported_constants(source_name: str, defines: dict[str, int] | None) -> dict[str, int]:
    """Every ``extern "C" __constant__ u32`` that ``csrc/<source_name>`` defines for these defines, by name
    (read from NVRTC's PTX of one compile, not cached): the kernels' own statement of sizes the host must
    agree with (a GEMM's shared memory: ``mxfp4_stream_smem_bytes``, ``mxfp4_wgmma_smem_bytes``)."""
    ptx = _compiled(source_name, (CSRC / source_name).read_text(), _options(defines), _ptx).decode(errors="replace")
    return {name: int(value) for name, value in re.findall(r"\.const \.align \d+ \.u32 (\w+) = (\d+);", ptx)}


def exported_constant(source_name: str, defines: dict[str, int] | None, name: str) -> int:
    """The one of :func:`exported_constants` named ``name``."""
    found = exported_constants(source_name, defines).get(name)
    if found is None:
        raise CompileError(f"{source_name} {defines} exports no u32 constant {name}")
    return found


def _exported(source_name: str, defines: dict[str, int] | None, name: str) -> tuple[str, int | None, str]:
    """The PTX declaration of the ``extern "C" __constant__`` ``name`` of ``csrc/<source_name>`` built with
    ``defines``: its type (``.u32``, or ``.b8`` for an aggregate), its bytes (an aggregate's, else None) and
    its initializer's text. NVRTC's PTX with the shipped options but the virtual architecture (the same
    PTX, without running ptxas: half the time), not cached."""

    options = tuple(f"-arch=compute_{ARCH[3:]}" if o == f"-arch={ARCH}" else o for o in _options(defines))
    ptx = _compiled(source_name, (CSRC / source_name).read_text(), options, _ptx).decode(errors="replace")
    found = re.search(rf"\.const \.align \d+ (\.u32|\.b8) {re.escape(name)}(?:\[(\d+)\])? = ([^;]*);", ptx)
    if found is None:
        raise CompileError(f"{source_name} {defines} exports no constant {name}")
    return found.group(1), found.group(2) and int(found.group(2)), found.group(3)


def exported_table(source_name: str, defines: dict[str, int] | None, name: str) -> list[int]:
    """The u32 entries of the ``extern "C" __constant__`` aggregate ``name`` (a struct holding one u32
    array) that ``csrc/<source_name>`` defines for these defines, from NVRTC's PTX: a kernel's statement
    of sizes that depend on the shape (the decode kernels' shared memory for each K range,
    ``mxfp4_decode_smem_bytes``)."""
    kind, size, init = _exported(source_name, defines, name)
    if kind != ".b8" or size is None or size % 4:
        raise CompileError(f"{source_name} {defines}: {name} is not a table of u32")
    data = [int(x) for x in init.strip(" {}").split(",") if x.strip()]
    data += [0] * (size - len(data))  # NVRTC leaves out the trailing zero bytes
    return [int.from_bytes(bytes(data[i:i + 4]), "little") for i in range(0, size, 4)]
