"""The CUDA backend without a GPU: NVRTC's errors carry its log (every shipped variant compiles in
tests/test_launch.py), the device functions' arithmetic, emulated here,
matches mxfp4.formats bit for bit, and the large-M kernels' packed shift and biased accumulator start
are exact."""
import pytest
import torch

from mxfp4 import formats
from mxfp4.formats import E2M1_VALUES

jit = pytest.importorskip("mxfp4.cuda.jit")


def test_compile_errors_carry_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    with pytest.raises(jit.CompileError, match="MT, G, KW, KS and STAGES"):
        jit.compile_cubin("gemm_stream.cu", {})


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


# ---- emulation of gemm_wgmma.cu's integer and float tricks ----------------------------------------

def shl_s8x4(x: int, s: int) -> int:
    return ((x << s) & 0xFFFFFFFF) & (0x01010101 * ((0xFF << s) & 0xFF))


def test_packed_int8_shift_every_value_and_shift():
    """shl_s8x4 shifts four packed int8 (twice e2m1 values, |v| <= 12) by 0..3, no carry between them."""
    import itertools

    values = [int(2 * v) for v in E2M1_VALUES]
    for s in range(4):
        for quad in itertools.product(values, repeat=4):
            word = int.from_bytes(bytes(v & 0xFF for v in quad), "little")
            got = shl_s8x4(word, s).to_bytes(4, "little")
            assert [int.from_bytes(got[j:j + 1], "little", signed=True) for j in range(4)] == [v << s for v in quad]


def test_biased_accumulator_start_gives_the_scaled_sum_exactly():
    """The fast path starts the int32 accumulator at the bits of 1.5 * 2**23 * 2**(e - 128) (e <= 232,
    the prep's fold bound); after the int32 sum i is added, float(bits) - start is i * 2**(e - 128),
    exactly, for every |i| < 2**22 (a folded segment's sum is at most 256 * 96 * 96)."""
    import numpy as np

    e = np.arange(0, 233, dtype=np.int64)[:, None]
    i = np.array([0, 1, -1, 3, -7, 12345, -98765, 2 ** 21 + 17, -(2 ** 22 - 1), 2 ** 22 - 1], dtype=np.int64)[None, :]
    start = (0x4B400000 + (e - 128) * (1 << 23)).astype(np.uint32)
    x = (start.astype(np.int64) + i).astype(np.uint32).view(np.float32)
    got = x.astype(np.float64) - start.view(np.float32).astype(np.float64)
    assert ((got.astype(np.float32) - got) == 0).all()  # the float32 subtraction is exact
    assert (got == i * np.ldexp(1.0, (e - 128).astype(np.int32))).all()
    assert 256 * 96 * 96 < 2 ** 22
    assert ((((e + 22) << 23) | 0x400000).astype(np.uint32) == start).all()  # gemm_small.cu's form of the start


def test_short_k_fold_bound_every_byte():
    """gemm_small.cu tests four scale bytes at once for one above 232 (the fold's bound):
    ((x & 0x7f7f7f7f) + 0x17171717) & x & 0x80808080; every byte value in every position, beside
    neighbours of every value, without carries between bytes."""
    import numpy as np

    b = np.arange(256, dtype=np.uint64)
    for pos in range(4):
        for other in (0, 0x7f, 0x80, 0xe8, 0xe9, 0xff):
            fill = sum(other << (8 * q) for q in range(4) if q != pos)
            x = (b << np.uint64(8 * pos)) | np.uint64(fill)
            hit = (((x & 0x7F7F7F7F) + 0x17171717) & x & 0x80808080) != 0
            assert (hit == ((b > 232) | (other > 232))).all(), (pos, other)


def prmt(a, b, sel):
    """PTX prmt.b32 (default mode) on numpy uint64 arrays: output byte i is byte (nibble i & 7) of b:a,
    or that byte's top bit replicated when nibble i has bit 3 set."""
    import numpy as np

    out = np.zeros(np.broadcast(a, b, sel).shape, dtype=np.uint64)
    for i in range(4):
        n = (sel >> np.uint64(4 * i)) & np.uint64(0xF)
        j = n & np.uint64(7)
        src = np.where(j < 4, a, b)
        byte = (src >> (np.uint64(8) * (j & np.uint64(3)))) & np.uint64(0xFF)
        byte = np.where(n & np.uint64(8), np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0)), byte)
        out |= byte << np.uint64(8 * i)
    return out


def test_converter_codes_to_int8_every_code_and_shift():
    """mxfp4_gemm_cv's cvt8: eight codes of a word to int8, twice the e2m1 value shifted left by the
    row's band shift s (0..3) through shifted tables, the negatives chosen by byte masks of the codes'
    signs (prmt's sign-replicating selectors). Every 4-code pattern in each half of the word, beside
    every other pattern's first code in the other half."""
    import numpy as np

    u = np.uint64
    quads = np.arange(1 << 16, dtype=np.uint64)
    doubled = np.array([int(2 * v) for v in E2M1_VALUES], dtype=np.int64)  # code 8 + i: -(code i)
    for s in range(4):
        keep = u(0x01010101 * ((0xFF << s) & 0xFF))
        pl, ph = u((0x03020100 << s) & 0xFFFFFFFF), u((0x0C080604 << s) & 0xFFFFFFFF)
        nl, nh = u((0xFDFEFF00 << s) & 0xFFFFFFFF) & keep, u((0xF4F8FAFC << s) & 0xFFFFFFFF) & keep
        for other in (0, 0x8, 0x7, 0xF, 0xA):
            for c in (quads | (u(other * 0x1111) << u(16)), (quads << u(16)) | u(other * 0x1111)):
                idx = c & u(0x77777777)
                c4 = (c << u(4)) & u(0xFFFFFFFF)
                mlo, mhi = prmt(c4, c, u(0xD9C8)), prmt(c4, c, u(0xFBEA))
                lo = (prmt(pl, ph, idx) & ~mlo & u(0xFFFFFFFF)) | (prmt(nl, nh, idx) & mlo)
                hi = (prmt(pl, ph, idx >> u(16)) & ~mhi & u(0xFFFFFFFF)) | (prmt(nl, nh, idx >> u(16)) & mhi)
                for j in range(8):
                    word = lo if j < 4 else hi
                    got = ((word >> u(8 * (j % 4))) & u(0xFF)).astype(np.int64)
                    got = np.where(got >= 128, got - 256, got)
                    code = ((c >> u(4 * j)) & u(0xF)).astype(np.int64)
                    assert (got == doubled[code] << s).all(), (s, other, j)


def test_converter_multiplier_bits_of_normal_exponents():
    """mxfp4_gemm_cv's converter writes a block's multiplier 2**(e - 128) as the float bits
    e * 2**23 - 2**23 when all eight exponent bytes of the row's segment lie in 2..254 (the byte
    compares against 0x02 and 0xFE), mx::half_scale otherwise: the two agree on every such byte, and
    the test admits exactly 2..254."""
    import struct

    def bits_to_float(b: int) -> float:
        return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]

    normal = [e for e in range(256) if e >= 0x02 and e <= 0xFE]
    assert normal == list(range(2, 255))
    for e in normal:
        assert bits_to_float(e * (1 << 23) - (1 << 23)) == 2.0 ** (e - 128), e
    # the excluded bytes are the ones the shortcut gets wrong: 0 and 1 (subnormal halves), 255 (NaN)
    assert bits_to_float(1 * (1 << 23) - (1 << 23)) != 2.0 ** -127
    assert bits_to_float(255 * (1 << 23) - (1 << 23)) == 2.0 ** 127  # not NaN
