"""The launch path's host side on the CPU: the driver structs' layout against cuda.bindings', and the
argument packer's bytes (the launches themselves: the GPU tests of each kernel family's file)."""
import ctypes
import struct

import pytest
import torch

from mxfp4.cuda import runtime

driver = pytest.importorskip("cuda.bindings.driver")


def test_launch_config_matches_the_driver_struct():
    ours = runtime.config((6, 4, 8), 288, 100_000, (1, 1, 4))
    theirs = driver.CUlaunchConfig()
    theirs.gridDimX, theirs.gridDimY, theirs.gridDimZ = 6, 4, 8   # blocks, a multiple of the cluster
    theirs.blockDimX, theirs.blockDimY, theirs.blockDimZ = 288, 1, 1
    theirs.sharedMemBytes = 100_000
    theirs.numAttrs = 1
    size = ctypes.sizeof(runtime._LaunchConfig)
    assert size == 56
    mine = bytearray(ctypes.string_at(ctypes.addressof(ours.struct), size))
    mine[40:48] = bytes(8)  # the attribute pointer differs: compared below
    assert bytes(mine) == ctypes.string_at(theirs.getPtr(), size)
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 1, 1, 4
    assert ctypes.string_at(ours.struct.attrs, 72) == ctypes.string_at(attr.getPtr(), 72)
    assert runtime._TMA_INT64 == int(driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_INT64)


def test_config_without_a_cluster_has_no_attributes():
    cfg = runtime.config((10, 1, 1), 256, 0, None)
    assert tuple(cfg.struct.grid) == (10, 1, 1) and cfg.struct.num_attrs == 0 and not cfg.struct.attrs


def test_packer_lays_out_pointers_int32s_and_tensor_maps():
    tmap = runtime.TensorMap()
    ctypes.memmove(tmap.address, bytes(range(128)), 128)
    args = (0x1122334455667788, -3, tmap, 7, 0xABC)
    p = runtime._Packer(tuple(map(type, args)))
    p.pack(args)
    slots = [p.params[i] for i in range(5)]
    assert slots[0] == p.base and slots[1] == p.base + 8 and slots[2] % 64 == 0
    assert struct.unpack("<Q", ctypes.string_at(slots[0], 8))[0] == 0x1122334455667788
    assert struct.unpack("<i", ctypes.string_at(slots[1], 4))[0] == -3  # an int32 parameter: the low 4 bytes
    assert ctypes.string_at(slots[2], 128) == bytes(range(128))
    assert struct.unpack("<i", ctypes.string_at(slots[3], 4))[0] == 7
    assert struct.unpack("<Q", ctypes.string_at(slots[4], 8))[0] == 0xABC
    for kind in (float, bool):
        with pytest.raises(TypeError, match="kernel arguments must be"):
            runtime._Packer((kind,))


def test_a_kernel_keeps_its_first_launchs_packer(monkeypatch):
    class Driver:
        def cuLaunchKernelEx(self, cfg, function, params, extra):
            return 0

    monkeypatch.setattr(runtime, "_driver", lambda: Driver())
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0, raising=False)
    k = runtime.Kernel("k", 1, None)
    cfg = runtime.config((1, 1, 1), 32, 0, None)
    runtime.launch(k, cfg, torch.device("cpu"), 1, 2)
    packer = k.packer
    runtime.launch(k, cfg, torch.device("cpu"), 3, 4)
    assert k.packer is packer and struct.unpack("<qq", ctypes.string_at(packer.base, 16)) == (3, 4)
    with pytest.raises(TypeError, match="k takes 2 arguments, got 3"):
        runtime.launch(k, cfg, torch.device("cpu"), 1, 2, 3)


def test_gemm_launches_pass_their_arguments_in_order(monkeypatch):
    """cuda.ops' launches through runtime.launch, the driver replaced by a recorder that reads back the
    config and every argument slot: what cuLaunchKernelEx would get."""
    import torch

    from mxfp4 import plan
    from mxfp4.cuda import ops as cuda_ops

    seen = []

    class Driver:
        def cuLaunchKernelEx(self, cfg, function, params, extra):
            c = runtime._LaunchConfig.from_address(cfg)
            slots = (ctypes.c_void_p * 12).from_address(params)  # the prep has 12 arguments
            seen.append((function, tuple(c.grid), tuple(c.block), c.shmem, c.stream, c.num_attrs, slots))
            return 0

    monkeypatch.setattr(runtime, "_driver", lambda: Driver())
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0x5000, raising=False)
    kernel = runtime.Kernel("mxfp4_gemm_small", 0x1234, None)
    params = plan.SmallParams(2, 4, 1, 4, 2)
    monkeypatch.setattr(runtime, "small_launch", lambda p, n, m, dev: (kernel, runtime.config(
        (p.grid(n), 1, 1), p.threads, 5000, (p.cluster, 1, 1))))
    a = torch.zeros(3, 128, dtype=torch.bfloat16)
    data = torch.zeros(64, 64, dtype=torch.uint8)
    scales = torch.zeros(256, 8, dtype=torch.uint8)
    out = torch.zeros(3, 64, dtype=torch.bfloat16)
    cuda_ops.gemm_a4w4_small(a, data, scales, out, params)
    function, grid, block, shmem, stream, attrs, slots = seen[-1]
    assert (function, grid, block, shmem, stream, attrs) == (0x1234, (2, 1, 1), (256, 1, 1), 5000, 0x5000, 1)
    q = lambda i: struct.unpack("<Q", ctypes.string_at(slots[i], 8))[0]  # noqa: E731
    d = lambda i: struct.unpack("<i", ctypes.string_at(slots[i], 4))[0]  # noqa: E731
    assert (q(0), d(1), q(2), q(3), d(4), q(5), d(6), d(7), d(8), d(9)) == (
        a.data_ptr(), 128, data.data_ptr(), scales.data_ptr(), 8, out.data_ptr(), 64, 3, 64, 128)

    # the streaming GEMM: the token quantizer (A, its K and the weight's, the workspace, the flags),
    # then the GEMM as its dependent (the workspace's A, the weight as stored, C, the partials, the flags)
    sp = plan.StreamParams(1, 4, 2, 16, 3)
    quant, gemm = runtime.Kernel("quant", 3, None), runtime.Kernel("gemm_stream", 4, None)
    ws = sp.workspace_offsets(plan.Problem(8, 64, 128), 2)
    monkeypatch.setattr(runtime, "stream_launch", lambda p, n, k, dtype, dev: (
        quant, runtime.config((1, 1, 1), 256, 0, None), gemm,
        runtime.config((2, 1, 1), p.threads, 7000, None, dependent=True), 2, ws))
    cuda_ops.gemm_a4w4_stream(a, data, scales, out, sp)
    (f1, *_, s1), (f2, grid2, block2, shmem2, _, attrs2, s2) = seen[-2:]
    q1 = lambda i: struct.unpack("<Q", ctypes.string_at(s1[i], 8))[0]  # noqa: E731
    d1 = lambda i: struct.unpack("<i", ctypes.string_at(s1[i], 4))[0]  # noqa: E731
    q2 = lambda i: struct.unpack("<Q", ctypes.string_at(s2[i], 8))[0]  # noqa: E731
    d2 = lambda i: struct.unpack("<i", ctypes.string_at(s2[i], 4))[0]  # noqa: E731
    qa = q1(5)
    qs, flags = qa + 8 * 128, qa + 8 * 128 + 8 * 4 * 4
    assert (f1, f2, grid2, block2, shmem2, attrs2) == (3, 4, (2, 1, 1), (sp.threads, 1, 1), 7000, 1)
    assert (q1(0), d1(1), d1(2), d1(3), d1(4), q1(6), d1(7), q1(8), d1(9)) == (
        a.data_ptr(), 128, 3, 128, 128, qs, 8, flags, 2)
    assert (q2(0), q2(1), q2(2), q2(3), d2(4), q2(5), d2(6), d2(7), d2(8), d2(9), q2(10), q2(11)) == (
        qa, qs, data.data_ptr(), scales.data_ptr(), 8, out.data_ptr(), 64, 3, 64, 128, flags + 256, flags)

    # the large-M kernel: prep, then the GEMM with the tensor map by value
    tmap = runtime.TensorMap()
    ctypes.memmove(tmap.address, bytes(range(128)), 128)
    monkeypatch.setattr(runtime, "weight_map", lambda address, groups, k: tmap)
    wg = plan.WgmmaParams(64, 3)
    g = runtime.wgmma_geometry(wg, 3, 64, 128)
    prep, gemm = runtime.Kernel("prep", 1, None), runtime.Kernel("gemm", 2, None)  # alive: their packers hold the bytes
    monkeypatch.setattr(runtime, "wgmma_launch", lambda p, m, n, k, dev: (
        prep, runtime.config((g["a_ctas"] + g["w_ctas"], 1, 1), 256, 0, None),
        gemm, runtime.config((g["ntile"] * g["nwt"], 1, 1), 512, 1000, None), g))
    cuda_ops.gemm_a4w4_wgmma(a, data, scales, out, wg)
    (f1, *_, s1), (f2, grid2, block2, shmem2, _, attrs2, s2) = seen[-2:]
    assert (f1, f2, block2, shmem2, attrs2) == (1, 2, (512, 1, 1), 1000, 0)
    assert struct.unpack("<Q", ctypes.string_at(s1[0], 8))[0] == a.data_ptr()
    assert struct.unpack("<Q", ctypes.string_at(s1[4], 8))[0] == data.data_ptr()
    ablob = struct.unpack("<Q", ctypes.string_at(s1[8], 8))[0]
    assert g["w_ctas"] == 0 and g["wblob"] == 0  # mxfp4_gemm_cv converts the weight's codes itself
    assert struct.unpack("<Q", ctypes.string_at(s2[0], 8))[0] == ablob
    assert struct.unpack("<Q", ctypes.string_at(s2[1], 8))[0] == scales.data_ptr()  # its scale bytes as stored
    assert struct.unpack("<i", ctypes.string_at(s2[2], 4))[0] == scales.shape[1]
    assert s2[3] % 64 == 0 and ctypes.string_at(s2[3], 128) == bytes(range(128))
    assert struct.unpack("<Q", ctypes.string_at(s2[4], 8))[0] == out.data_ptr()
    assert [struct.unpack("<i", ctypes.string_at(s2[i], 4))[0] for i in range(5, 11)] == [
        64, 3, 64, 128, g["ntile"], g["nwt"]]

    # the int8-weight GEMM: the prep also writes the weight's blob, the GEMM reads it (no tensor map)
    i8 = plan.WgmmaParams(128, 3, True)
    g = runtime.wgmma_geometry(i8, 3, 64, 128)
    assert g["w_ctas"] == 1 and g["wblob"] == i8.wblob_bytes
    gemm = runtime.Kernel("gemm_i8", 2, None)  # another kernel: its own arguments
    cuda_ops.gemm_a4w4_wgmma(a, data, scales, out, i8)
    (f1, *_, s1), (f2, *_, s2) = seen[-2:]
    ablob = struct.unpack("<Q", ctypes.string_at(s1[8], 8))[0]
    wblob = struct.unpack("<Q", ctypes.string_at(s1[9], 8))[0]
    assert wblob == ablob + g["ablob"]
    assert struct.unpack("<Q", ctypes.string_at(s2[0], 8))[0] == ablob
    assert struct.unpack("<Q", ctypes.string_at(s2[1], 8))[0] == wblob
    assert struct.unpack("<Q", ctypes.string_at(s2[2], 8))[0] == out.data_ptr()
    assert [struct.unpack("<i", ctypes.string_at(s2[i], 4))[0] for i in range(3, 9)] == [
        64, 3, 64, 128, g["ntile"], g["nwt"]]
