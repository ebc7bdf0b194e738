"""The launch path's host side on the CPU: the driver structs' layout against cuda.bindings', and the
argument packer's bytes (the launches themselves are tests/test_gpu.py's)."""
import ctypes
import struct

import pytest

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
    args = (0x1122334455667788, runtime.i32(-3), tmap, runtime.i32(7), 0xABC)
    p = runtime._Packer(tuple(map(type, args)))
    p.pack(args)
    slots = [p.params[i] for i in range(5)]
    assert slots[0] == p.base and slots[1] == p.base + 8 and slots[2] % 64 == 0
    assert struct.unpack("<Q", ctypes.string_at(slots[0], 8))[0] == 0x1122334455667788
    assert struct.unpack("<i", ctypes.string_at(slots[1], 4))[0] == -3
    assert ctypes.string_at(slots[2], 128) == bytes(range(128))
    assert struct.unpack("<i", ctypes.string_at(slots[3], 4))[0] == 7
    assert struct.unpack("<Q", ctypes.string_at(slots[4], 8))[0] == 0xABC
    with pytest.raises(TypeError, match="kernel arguments must be"):
        runtime._Packer((float,))
