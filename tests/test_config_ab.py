"""tools/config_ab.py (a GPU tool) reads each config from the command line; here (CPU) that a
config string becomes the KernelConfig it names and a malformed one is refused by name."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
config_ab = pytest.importorskip("config_ab")

from mxfp4 import KernelConfig  # noqa: E402


def test_config_strings():
    want = KernelConfig(8, 128, 1, 8, 1, 16, "int8_fused")
    assert config_ab.parse("8,128,1,8,1,16,int8_fused", 32, 4096, 512) == want
    assert config_ab.parse("64,64,1,4,3,8,int8_meet", 256, 3072, 1536).kernel == "int8_meet"
    assert config_ab.parse("16,128,4,4,3,8,int8_fused,tma", 8, 5760, 2880).w_tma
    assert config_ab.config_tag(KernelConfig(16, 128, 4, 4, 3, 8, "int8_fused", w_tma=True)) == \
        "int8_fused 16x128 s4 w4 st3 b8 tma"
    assert config_ab.parse("16,64,3,4,1,16,int8_fused,packed", 8, 3072, 1536).packed
    assert config_ab.config_tag(KernelConfig(16, 64, 3, 4, 1, 16, "int8_fused", packed=True)) == \
        "int8_fused 16x64 s3 w4 st1 b16 packed"
    with pytest.raises(SystemExit, match="KERNEL\\[,tma\\|,packed\\]"):
        config_ab.parse("16,128,4,4,3,8,int8_fused,fast", 8, 5760, 2880)
    with pytest.raises(SystemExit, match="BM,BN,SPLIT,WARPS,STAGES,STEP,KERNEL"):
        config_ab.parse("64,64,1,4,int8_meet", 256, 3072, 1536)
    with pytest.raises(ValueError, match="block_m must be a power of two >= 16"):
        config_ab.parse("8,64,1,4,3,8,int8_meet", 256, 3072, 1536)
