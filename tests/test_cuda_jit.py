"""The CUDA backend without a GPU: NVRTC's errors carry its log (every shipped variant compiles in
tests/test_launch.py), and mxfp4.cuh's arithmetic, emulated here, matches mxfp4.formats bit for bit
(each family's own tricks: tests/test_<family>.py)."""
import pytest
import torch

from mxfp4 import formats
from mxfp4.formats import E2M1_VALUES

jit = pytest.importorskip("mxfp4.cuda.jit")


def test_compile_errors_carry_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    with pytest.raises(jit.CompileError, match="MT, G, KW, KS and STAGES"):
        jit.compile_cubin("gemm_stream.cu", {})


def test_cache_key_covers_the_headers_a_source_includes(tmp_path, monkeypatch):
    """A source's key (and NVRTC's headers) are the csrc headers it includes, through other headers too:
    an edit of one of them compiles anew, an edit of another source's header does not."""
    import shutil

    text = (jit.CSRC / "gemm_wgmma.cu").read_text()
    assert set(jit.headers(text)) == {"mxfp4.cuh", "hopper.cuh", "wgmma.cuh", "wgmma_prep.cuh", "wgmma_band.cuh",
                                      "wgmma_blob.cuh", "wgmma_i8.cuh", "wgmma_consumer.cuh", "wgmma_cv.cuh",
                                      "cluster.cuh", "grouped.cuh"}
    assert jit.headers((jit.CSRC / "gemm_stream.cu").read_text()) == ("grouped.cuh", "mxfp4.cuh", "hopper.cuh",
                                                                       "mma.cuh", "streamk.cuh")
    csrc = tmp_path / "csrc"
    shutil.copytree(jit.CSRC, csrc)
    monkeypatch.setattr(jit, "CSRC", csrc)
    options = jit._options(dict(TN=64, STAGES=3, INT8_WEIGHT=0))
    wgmma, stream = jit._key(text, options), jit._key((csrc / "gemm_stream.cu").read_text(), options)
    (csrc / "wgmma_band.cuh").write_text((csrc / "wgmma_band.cuh").read_text() + "\n")  # included by way of the prep
    assert jit._key(text, options) != wgmma and jit._key((csrc / "gemm_stream.cu").read_text(), options) == stream


# ---- emulation of mxfp4.cuh's arithmetic -------------------------------------------------------

def byte_perm(x: int, y: int, s: int) -> int:
    src = (x | (y << 32)).to_bytes(8, "little")
    return int.from_bytes(bytes(src[(s >> (4 * i)) & 7] for i in range(4)), "little")


def e2m1x4_to_s8x4(c: int) -> int:
    idx = c & 0x7777
    pos = byte_perm(0x03020100, 0x0C080604, idx)
    neg = byte_perm(0xFDFEFF00, 0xF4F8FAFC, idx)
    return byte_perm(pos, neg, ((c >> 1) & 0x4444) | 0x3210)


def test_code_to_int8_conversion_every_nibble():
    for c in range(16):
        for lane in range(4):
            word = e2m1x4_to_s8x4(c << (4 * lane))
            got = int.from_bytes(word.to_bytes(4, "little")[lane:lane + 1], "little", signed=True)
            assert got == 2 * E2M1_VALUES[c], (c, lane)


def half_scale(b: int) -> float:
    return float("nan") if b == 255 else 2.0 ** (b - 128)


def test_half_scale_bits():
    import struct
    for b in range(255):
        if b >= 2:
            bits = (b - 1) << 23
        else:
            bits = 0x00400000 >> (1 - b)
        assert struct.unpack("<f", struct.pack("<I", bits))[0] == half_scale(b)


def test_in_kernel_quantizer_formula_every_bf16_pattern():
    """quantize8's q = |x| * 2**-e and the rint branches give formats.quantize_codes' codes."""
    x = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(-1, 32)
    codes, scales = formats.quantize_codes(x)
    bits = x.float().view(torch.int32)
    mag = bits & 0x7FFFFFFF
    amax = mag.amax(-1, keepdim=True)
    biased = (amax + 0x200000) >> 23
    e = torch.where(biased == 255, torch.full_like(biased, 127), (biased - 129).clamp(-127, 127))
    q = mag.view(torch.float32) * torch.pow(2.0, -e.float())
    r2 = torch.round(q * 2)   # rint, ties to even, as fmaf(q, 2, 1.5 * 2**23) does
    r1 = torch.round(q)
    c = torch.where(q < 2, r2, torch.where(q < 4, r1 + 2, torch.where(q > 5, 7.0, 6.0))).int()
    c = c | ((bits < 0).int() << 3)
    finite = (amax < 0x7F800000).squeeze(-1)
    assert torch.equal(c[finite].to(torch.uint8), codes[finite])
    assert torch.equal((e.squeeze(-1) + 127)[finite].to(torch.uint8), scales.squeeze(-1)[finite])
    assert (scales[~finite] == 255).all()
