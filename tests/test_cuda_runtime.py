"""The launch path's host side on the CPU: the driver structs' layout against cuda.bindings' (the
argument buffer and every launch's arguments: tests/test_launch.py; the launches themselves: the GPU
tests of each kernel family's file)."""
import ctypes

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


def test_config_without_a_cluster_has_no_attributes():
    cfg = runtime.config((10, 1, 1), 256, 0, None)
    assert tuple(cfg.struct.grid) == (10, 1, 1) and cfg.struct.num_attrs == 0 and not cfg.struct.attrs
