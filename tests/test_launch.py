"""The kernels' launches on the CPU: every shipped launch's arguments against its kernel's real
prototype (the parameters' kinds in the compiled PTX, their names and C types in the .cu source), the
values they carry, and the argument buffer the driver reads."""
import ctypes
import itertools
import multiprocessing
import os
import re
import struct
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch

from mxfp4 import plan
from mxfp4.bench.shapes import shape_set

jit = pytest.importorskip("mxfp4.cuda.jit")
runtime = pytest.importorskip("mxfp4.cuda.runtime")
from mxfp4.cuda import launch, ops as cuda_ops  # noqa: E402
from mxfp4.cuda.launch import stream  # noqa: E402

PTR, I32, I64 = runtime.Param.PTR, runtime.Param.I32, runtime.Param.I64


def test_entry_params_are_the_ptx_prototypes_and_the_compile_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    found = jit.entry_params("quantize.cu")
    # mxfp4_quantize(const u16 *A, int lda, u8 *codes, u8 *scales, int M, int K)
    assert found["mxfp4_quantize"] == (".u64", ".u32", ".u64", ".u64", ".u32", ".u32")
    assert set(found) == {"mxfp4_quantize", "mxfp4_quantize_tokens", "mxfp4_quantize_grouped", "mxfp4_quantize_bands"}
    cached, = tmp_path.iterdir()  # the compile's cubin, which compile_cubin now reads
    assert jit.compile_cubin("quantize.cu") == cached.read_bytes() and cached.read_bytes()[:4] == b"\x7fELF"


def _function_bodies_with_dynamic_smem() -> dict[str, str]:
    """Every function of csrc that declares the dynamic shared memory (extern __shared__): its name and body."""
    found = {}
    for path in sorted(jit.CSRC.glob("*.cu*")):
        text = path.read_text()
        for hit in re.finditer(r"extern __shared__", text):
            # the function's head: the last line before the declaration that starts in column 0 with a name and a "("
            head_at = max(m.start() for m in re.finditer(r"^[A-Za-z_].*\(", text[:hit.start()], re.M))
            open_at = text.index("{", head_at)
            depth, end = 0, open_at
            for end in range(open_at, len(text)):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                if depth == 0:
                    break
            name = next(n for n in re.findall(r"(\w+)\(", text[head_at:open_at])
                        if n not in ("__launch_bounds__", "__maxnreg__"))
            found[f"{path.name}:{name}"] = text[open_at:end + 1]
    return found


# The decode tile checks once its weight loads and scale decode are under way (thread 0, before A's copy): the
# check at its entry rescheduled the whole GEMM and cost 6% (H100); its earlier shared-memory writes past a short
# allocation fault (an illegal address), they do not run on.
LATE_CHECK = {"gemm_decode.cu:decode_tile"}


def test_every_kernel_traps_on_too_little_dynamic_shared_memory():
    """Every function that declares the dynamic shared memory checks its size (mx::require_dynamic_smem, a
    trap) before its first barrier or bulk copy (LATE_CHECK: before A's copy): a launch with too little fails,
    it never runs on less."""
    bodies = _function_bodies_with_dynamic_smem()
    assert len(bodies) >= 7, sorted(bodies)  # small, decode, stream, band, cv, i8, the wgmma peak
    assert LATE_CHECK <= set(bodies)
    for name, body in bodies.items():
        at = body.find("require_dynamic_smem(")
        assert at >= 0, name
        uses = ("load_a(",) if name in LATE_CHECK else ("mbar_init(", "bulk_copy(", "__syncthreads()", "named_barrier(",
                                                        "cluster_sync")
        for first_use in uses:
            assert body.find(first_use) == -1 or body.find(first_use) > at, (name, first_use)


# ---- the argument buffer ---------------------------------------------------------------------------

def test_packer_lays_out_each_kind():
    sig = runtime.Signature("k", p=PTR, i=I32, j=I32, q=I64)
    k = runtime.Kernel(sig, 1, None)
    k.packer.pack((0x1122334455667788, -3, 7, -(2 ** 40)))
    slots = [k.packer.params[i] for i in range(4)]
    assert slots == [k.packer.base + 8 * i for i in range(4)]  # an 8-byte slot a parameter
    assert struct.unpack("<Q", ctypes.string_at(slots[0], 8))[0] == 0x1122334455667788
    assert struct.unpack("<i", ctypes.string_at(slots[1], 4))[0] == -3  # an int32 parameter: the low 4 bytes
    assert struct.unpack("<i", ctypes.string_at(slots[2], 4))[0] == 7
    assert struct.unpack("<q", ctypes.string_at(slots[3], 8))[0] == -(2 ** 40)
    assert sig.ptx == (".u64", ".u32", ".u32", ".u64")
    assert repr(sig) == "k(T * p, int i, int j, long long q)"


def test_a_launch_takes_its_signatures_arguments(monkeypatch):
    class Driver:
        def cuLaunchKernelEx(self, cfg, function, params, extra):
            return 0

    monkeypatch.setattr(runtime, "_driver", lambda: Driver())
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0, raising=False)
    k = runtime.Kernel(runtime.Signature("k", p=PTR, n=I32), 1, None)
    cfg, cpu = runtime.config((1, 1, 1), 32, 0, None), torch.device("cpu")
    runtime.launch(k, cfg, cpu, 1 << 40, 2)
    assert struct.unpack("<Qi", ctypes.string_at(k.packer.base, 12)) == (1 << 40, 2)
    with pytest.raises(TypeError, match=r"k\(T \* p, int n\) takes 2 arguments, got 3"):
        runtime.launch(k, cfg, cpu, 1, 2, 3)
    for bad in ((1, 2 ** 31), (-1, 2), (1, 2.0)):  # out of an int32's or a pointer's range; not an integer
        with pytest.raises(TypeError, match=r"k\(T \* p, int n\): "):
            runtime.launch(k, cfg, cpu, *bad)


# ---- every shipped launch against its kernel -------------------------------------------------------

def shipped_cases():
    """(params, shape) for every variant plan.shipped_variants lists: the table's entries at their shapes,
    plan.choose's answers at the benchmark shapes, the large-M variants and each one's float32 twin;
    the grouped kernels' (and their float32 twins) at (T, E, N16, K64)."""
    table = plan.load_table()
    found = {p: key for key, p in table.items()}
    for s in shape_set("all"):
        p = plan.Problem(s.m, -(-s.n // 16) * 16, -(-s.k // 64) * 64)
        found.setdefault(plan.choose(p, table), (p.m, p.n, p.k))
    for p, shape in ((plan.WGMMA_TN64, (64, 2112, 7168)), (plan.WGMMA_TN128, (128, 7168, 2048)),
                     (plan.WGMMA_INT8, (1024, 7168, 2048))):
        found.setdefault(p, shape)
    found.update({plan.float32_output(p): shape for p, shape in found.items()})
    grouped = {}
    for e, n, k in plan.GROUPED_SHAPES:
        for t in plan.GROUPED_ROWS:
            grouped.setdefault(plan.grouped_heuristic(t, e, n, k), (t, e, n, k))
    grouped.update({plan.float32_output(p): shape for p, shape in grouped.items()})
    return found, grouped


def source_prototypes(source: str) -> dict[str, list[tuple[str, runtime.Param]]]:
    """Each extern "C" kernel of csrc/<source> and the headers it includes: its parameters' names and kinds
    as the C prototype declares them (a pointer, long long, int)."""
    text = (jit.CSRC / source).read_text()
    text += "".join((jit.CSRC / h).read_text() for h in jit.headers(text))
    found = {}
    for name, params in re.findall(r'extern "C" __global__ void\s+(?:__\w+__\s*\([^)]*\)\s*)*(\w+)\(([^)]*)\)', text):
        decls = [" ".join(d.split()) for d in params.split(",")]
        found[name] = [(re.search(r"(\w+)$", d).group(1), PTR if "*" in d else I64 if d.startswith("long long ")
                        else I32 if d.startswith("int ") else None) for d in decls]
    return found


class Recorder:
    """The driver, the kernel loader and the stream query replaced: every launch's kernel, config and the
    arguments read back from the slots that cuLaunchKernelEx would get, by the kernel's signature."""

    def __init__(self, monkeypatch):
        self.kernels, self.builds, self.launches, self.allocated = {}, {}, [], []
        monkeypatch.setattr(runtime, "kernel", self.kernel)
        monkeypatch.setattr(runtime, "_driver", lambda: self)
        monkeypatch.setattr(runtime, "prefer_shared", lambda k: None)
        monkeypatch.setattr(runtime, "allow_large_cluster", lambda k: None)
        monkeypatch.setattr(stream, "sm_count", lambda index: 132)
        monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0x5000, raising=False)
        empty = torch.empty

        def recorded_empty(*args, **kwargs):  # what a call allocates: its workspace
            self.allocated.append(empty(*args, **kwargs))
            return self.allocated[-1]

        monkeypatch.setattr(torch, "empty", recorded_empty)

    def kernel(self, source, signature, defines, device, smem_bytes=0):
        k = runtime.Kernel(signature, 0x1000 + len(self.kernels), None)
        self.kernels[k.function] = (k, source, smem_bytes)
        self.builds.setdefault((source, tuple(sorted((defines or {}).items()))), set()).add(signature)
        return k

    def cuLaunchKernelEx(self, cfg, function, params, extra):
        k, source, smem = self.kernels[function]
        c = runtime._LaunchConfig.from_address(cfg)
        slots = (ctypes.c_void_p * k.packer.count).from_address(params)
        values = {}
        for name, kind, slot in zip(k.signature.names, k.signature.kinds, slots):  # each parameter's own size
            fmt = {PTR: "<Q", I64: "<q", I32: "<i"}[kind]
            values[name] = struct.unpack(fmt, ctypes.string_at(slot, struct.calcsize(fmt)))[0]
        attrs = (runtime._LaunchAttribute * c.num_attrs).from_address(c.attrs) if c.num_attrs else ()
        cluster = next((tuple(a.value[:3]) for a in attrs if a.id == runtime._CLUSTER_DIMENSION), (1, 1, 1))
        self.launches.append((k, source, smem, tuple(c.grid), c.shmem, cluster, values))
        return 0


def check_launches(rec, start, known, expected):
    """The launches since ``start``: an argument whose name is in ``expected`` carries that value (the same
    name means the same value in every kernel's prototype: M, N, K, A, lda, W, Wsc, ldsc, C, ldc, ...);
    every other pointer points into one of the ``known`` tensors or what the call allocated (its
    workspace; or just past its end, where a part of it is empty); dynamic shared memory within what
    the kernel allows; the grid whole clusters."""
    spans = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in known + rec.allocated]
    for k, source, smem, grid, shmem, cluster, values in rec.launches[start:]:
        assert shmem <= max(smem, 48 * 1024) and smem <= plan.SMEM_LIMIT, k.name
        assert all(g % c == 0 for g, c in zip(grid, cluster)), (k.name, grid, cluster)
        for (name, value), kind in zip(values.items(), k.signature.kinds):
            if name in expected:
                assert value == expected[name], (k.signature, name, value, expected[name])
            elif kind is PTR:
                assert any(lo <= value <= hi for lo, hi in spans), (k.signature, name)  # hi: an empty part


def operands(m, n, k, dtype=torch.bfloat16, ka=None, out_f32=False, experts=None):
    """A [m, ka or k], the weight (N = n, K = k; or ``experts`` of N padded to 256 rows, stacked), C [m, n]
    and the values the kernels' common parameters carry for them."""
    a = torch.empty(m, ka or k, dtype=dtype)
    padded = -(-n // 256) * 256
    data = torch.empty(n if experts is None else experts * padded, k // 2, dtype=torch.uint8)
    scales = torch.empty((experts or 1) * padded, k // 32, dtype=torch.uint8)
    out = torch.empty(m, n, dtype=torch.float32 if out_f32 else torch.bfloat16)
    names = dict(A=a.data_ptr(), lda=a.shape[1] if m == 1 else a.stride(0), M=m, Ka=a.shape[1], W=data.data_ptr(),
                 Wsc=scales.data_ptr(), ldsc=scales.shape[1], C=out.data_ptr(), ldc=out.stride(0), N=n, K=k)
    return a, data, scales, out, names


@pytest.mark.slow
def test_every_shipped_launch_matches_its_kernels_prototype(tmp_path, monkeypatch):
    """Every shipped variant (the table's, the heuristics', the grouped kernel's; the streaming GEMM with
    each dtype of A it reads) launched through cuda.ops on the CPU, each kernel's arguments as the launch
    packs them against the compiled kernel's prototype: NVRTC's PTX, with the options that build the
    shipped cubin (every build compiled once, into a fresh cache, in a process pool: ptxas leaves their
    wgmma unserialized, jit.CompileError otherwise), and the .cu prototype's names and kinds. Also the
    quantizer, the stream floor and the int8 wgmma peak."""
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    rec = Recorder(monkeypatch)
    monkeypatch.setattr(cuda_ops, "_launches", {})  # launches of the recorder's kernels: none kept after the test
    dense, grouped = shipped_cases()
    assert set(dense) | set(grouped) == set(plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")]))
    for params, (m, n, k) in sorted(dense.items(), key=str):
        params.check()
        calls = [(torch.bfloat16, None), (torch.float16, None), (torch.float32, None)]  # every family: a build a dtype
        if isinstance(params, (plan.StreamParams, plan.BandParams)):  # its quantizer reads K unpadded
            calls += [(torch.bfloat16, k - 32)]
        for dtype, ka in calls:
            rec.allocated.clear()
            a, data, scales, out, names = operands(m, n, k, dtype, ka, params.out_f32)
            start = len(rec.launches)
            cuda_ops.launch_for(params, m, data.shape[0], 2 * data.shape[1], dtype, a.device)(a, data, scales, out)
            assert len(rec.launches) == start + (1 if isinstance(params, plan.SmallParams) else 2)
            check_launches(rec, start, [a, data, scales, out], names)
    for (params, (t, e, n, k)), dtype in itertools.product(sorted(grouped.items(), key=str), launch.A_KINDS):
        rec.allocated.clear()
        params.check()
        a, data, scales, out, names = operands(t, n, k, dtype, out_f32=params.tile.out_f32, experts=e)
        offsets = torch.full((e,), t, dtype=torch.int32)
        start = len(rec.launches)
        cuda_ops.grouped_gemm_a4w4(a, data, scales, offsets, out, params, e, -(-n // 256) * 256)
        check_launches(rec, start, [a, data, scales, out, offsets],
                       {**names, "M": t, "T": t, "E": e, "offsets": offsets.data_ptr(), "off64": 0})
    rec.allocated.clear()
    a, data, scales, out, names = operands(3, 64, 256)
    start = len(rec.launches)
    cuda_ops.quantize(a)
    cuda_ops.stream_floor(data, scales, out, 264)
    check_launches(rec, start, [a, data, scales, out],
                   {**names, "w": data.data_ptr(), "s": scales.data_ptr(), "c": out.data_ptr()})
    rec.builds.setdefault(("wgmma_peak.cu", ()), set()).add(cuda_ops.PEAK)  # int8_wgmma_tops: timed on a GPU only

    builds = sorted(rec.builds)
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    listed = {(source, tuple(sorted((d or {}).items()))) for p in shipped for source, d in cuda_ops.builds(p)}
    # what mxfp4 compile builds: every shipped variant's builds, the plain quantizer, the bench's two kernels
    assert set(builds) == listed | {("quantize.cu", ()), ("stream_floor.cu", ()), ("wgmma_peak.cu", ())}
    assert {source for source, _ in builds} == {"gemm_small.cu", "gemm_decode.cu", "gemm_stream.cu", "gemm_band.cu",
                                                "gemm_wgmma.cu", "quantize.cu", "stream_floor.cu", "wgmma_peak.cu"}
    with ProcessPoolExecutor(max_workers=os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
        compiled = list(pool.map(jit.entry_params, [s for s, _ in builds], [dict(d) or None for _, d in builds]))
    prototypes = {}
    for (source, defines), found in zip(builds, compiled):
        declared = prototypes.setdefault(source, source_prototypes(source))
        for sig in rec.builds[(source, defines)]:
            assert found[sig.name] == sig.ptx, (source, defines, sig)
            assert declared[sig.name] == list(zip(sig.names, sig.kinds)), (source, sig)
        assert jit.compile_cubin(source, dict(defines) or None)[:4] == b"\x7fELF"  # the compile's, from the cache
    assert len(list(tmp_path.iterdir())) == len(builds)  # one cache file a build: split is a launch choice


def test_one_launch_a_family_and_shape(monkeypatch):
    """Every dense parameter set has its family's launch, built once per the part of the shape it depends
    on and A's dtype (every family reads fp16 and float32 A as they are)."""
    rec = Recorder(monkeypatch)
    monkeypatch.setattr(cuda_ops, "_launches", {})
    assert set(cuda_ops.FAMILIES) == set(plan.KERNEL_PARAMS)
    cpu = torch.device("cpu")
    small = plan.SmallParams(2, 4, 1, 16, 2)
    one = cuda_ops.launch_for(small, 1, 4096, 512, torch.bfloat16, cpu)
    assert cuda_ops.launch_for(small, 8, 4096, 512, torch.bfloat16, cpu) is one  # one tile of 8 rows
    assert cuda_ops.launch_for(small, 9, 4096, 512, torch.bfloat16, cpu) is not one
    assert one.workspace_bytes == 0 and tuple(one.configs[0].grid) == (small.grid(4096), 1, 1)
    sp = plan.StreamParams(1, 4, 2, 16, 3)
    bf16 = cuda_ops.launch_for(sp, 1, 2112, 7168, torch.bfloat16, cpu)
    assert cuda_ops.launch_for(sp, 8, 2112, 7168, torch.bfloat16, cpu) is bf16
    assert cuda_ops.launch_for(sp, 8, 2112, 7168, torch.float32, cpu) is not bf16  # its quantizer reads the dtype
    assert bf16.workspace_bytes == sp.workspace_offsets(plan.Problem(8, 2112, 7168), bf16.grid)[3]
    fp16 = cuda_ops.launch_for(small, 1, 4096, 512, torch.float16, cpu)
    assert fp16 is not one  # the short-K kernel quantizes A itself: a build a dtype
    assert len(rec.kernels) == 2 + 2 * 2 + 1  # each launch built once: its kernels asked for once
    assert rec.builds[("gemm_small.cu", tuple(sorted({**small.defines(), "A_KIND": 1}.items())))]
    a = torch.empty(3, 96, dtype=torch.float16)
    same, pa, lda = cuda_ops.FAMILIES[plan.StreamParams].operand(a, 128)
    assert same is a and (pa, lda) == (a.data_ptr(), 96)  # as given: dtype and K
    b, pb, ldb = cuda_ops.FAMILIES[plan.SmallParams].operand(a, 128)  # its dtype, K padded to the weight's
    assert b.dtype is torch.float16 and b.shape == (3, 128) and launch.rows_ok(b) and (pb, ldb) == (b.data_ptr(), 128)
    assert cuda_ops.FAMILIES[plan.SmallParams].operand(b, 128)[0] is b
    c = torch.randn(3, 200).half()[:, 1:97]  # a start 2 bytes past 16: a copy the kernels can read
    d, pd, ldd = cuda_ops.FAMILIES[plan.StreamParams].operand(c, 128)
    assert d is not c and torch.equal(d, c) and launch.rows_ok(d) and (pd, ldd) == (d.data_ptr(), 96)
    with pytest.raises(ValueError, match="multiple of 8"):  # a copy's rows no kernel loads (K % 8 != 0): refused
        cuda_ops.FAMILIES[plan.StreamParams].operand(torch.randn(3, 100).half(), 128)
