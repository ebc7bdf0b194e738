"""Special values of the MXFP4 formats, with hand-written expectations (the spec is mxfp4/formats.py).

Zeros, subnormals, saturation, NaN/Inf, the top of the exponent range, ScaleRule.FLOOR, zero-size
inputs, every e8m0 byte times every code on dequantize, nibble packing, and input errors.
"""
from __future__ import annotations

import math

import pytest
import torch

import mxfp4
from mxfp4 import Layout, MXFP4Tensor, ScaleRule
from mxfp4.formats import pack_codes, unpack_codes

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FLOAT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def block(values, dtype=torch.float32, fill=0.0) -> torch.Tensor:
    """One 32-element block [1, 32]: `values` first, then `fill`."""
    vals = list(values) + [fill] * (32 - len(values))
    return torch.tensor([vals], dtype=torch.float64).to(dtype)


def codes_and_scales(x: torch.Tensor, rule: ScaleRule = ScaleRule.AITER) -> tuple[list, list]:
    q = mxfp4.quantize(x, rule)
    return unpack_codes(q.data).tolist(), q.scales.tolist()


# ---- zeros and subnormals ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_zero_blocks(dtype):
    """+0.0 block: scale byte 0, codes 0. -0.0 keeps its sign bit: code 8, bytes 0x88."""
    x = torch.cat([block([], dtype), block([], dtype, fill=-0.0)], dim=1)
    q = mxfp4.quantize(x)
    assert q.scales.tolist() == [[0, 0]]
    assert q.data.tolist() == [[0x00] * 16 + [0x88] * 16]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_subnormal_block_uses_exponent_minus_127(dtype):
    """amax = 2**-127 (subnormal) gives e = -127, and subnormals quantize by their true value."""
    x = block([2.0 ** -127, 2.0 ** -128, 3 * 2.0 ** -129, -(2.0 ** -128), 2.0 ** -133, 2.0 ** -129], dtype)
    codes, scales = codes_and_scales(x)
    assert scales == [[0]]
    assert codes[0][:6] == [2, 1, 2, 9, 0, 0]  # 1.0, 0.5, tie 0.75 -> 1.0, -0.5, tiny, tie 0.25 -> 0


def test_fp32_smallest_subnormals():
    """2**-149 is 2**-22 after scaling by 2**127: rounds to zero, with its sign."""
    codes, scales = codes_and_scales(block([2.0 ** -149, -(2.0 ** -149)]))
    assert scales == [[0]] and codes[0][:3] == [0, 8, 0]


@pytest.mark.parametrize("amax, byte", [
    (2.0 ** -127, 0),          # r = 0 (below 0.75 * 2**-126)
    (0.75 * 2.0 ** -126, 0),   # r = 2**-126, e = -128 clamped to -127
    (2.0 ** -126, 0),          # e = -128 clamped
    (2.0 ** -124, 1),          # e = -126
    (1.7421875 * 2.0 ** -124, 1),  # stays in its binade: e = -126
    (1.75 * 2.0 ** -124, 2),   # rounds up to 2**-123 -> e = -125
])
def test_scale_near_the_bottom(amax, byte):
    assert codes_and_scales(block([amax]))[1] == [[byte]]


# ---- saturation and the top of the range ------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_saturation_to_six(dtype):
    """Values between 6 and 8 times the scale become code 7 (6); amax mantissa < 1.75 keeps e low."""
    x = block([6.5, -6.75, 6.0, 5.5, 5.0], dtype)  # amax 6.75 = 1.6875 * 4 -> e = 0
    codes, scales = codes_and_scales(x)
    assert scales == [[127]] and codes[0][:5] == [7, 15, 7, 7, 6]
    x = block([7.875, -7.0, 6.25], dtype)  # FLOOR keeps e = 0 up to amax < 8
    codes, scales = codes_and_scales(x, ScaleRule.FLOOR)
    assert scales == [[127]] and codes[0][:3] == [7, 15, 7]


@pytest.mark.parametrize("amax, byte", [
    (1.75 * 2.0 ** 127, 254),            # rounds to 2**128 = Inf: log2 Inf clamps to 127
    (torch.finfo(torch.float32).max, 254),
    (1.7421875 * 2.0 ** 127, 252),       # rounds down: e = 127 - 2
    (1.75 * 2.0 ** 126, 252),            # rounds up to 2**127
])
def test_scale_at_the_top(amax, byte):
    """No amax gives byte 253 under AITER: the exponent jumps from 125 to the clamp at 127."""
    assert codes_and_scales(block([amax]))[1] == [[byte]]


def test_bf16_max_quantizes_to_two_times_2_127():
    x = block([torch.finfo(torch.bfloat16).max, -1.0 * 2 ** 127], torch.bfloat16)
    codes, scales = codes_and_scales(x)
    assert scales == [[254]] and codes[0][:2] == [4, 10]  # 1.99 -> 2.0, -1.0


# ---- NaN and Inf ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -float("nan")])
def test_nonfinite_poisons_only_its_block(bad, dtype):
    """A NaN / Inf block: scale byte 255 and every code 0 (even negative ones); neighbours unchanged."""
    good = block([1.0, -3.0, 0.5], dtype)
    poisoned = block([1.0, -3.0, bad, -2.0], dtype)
    q = mxfp4.quantize(torch.cat([good, poisoned, good], dim=1))
    assert q.scales.tolist() == [[126, 255, 126]]
    codes = unpack_codes(q.data)[0]
    assert codes[32:64].tolist() == [0] * 32
    assert torch.equal(codes[:32], codes[64:]) and codes[:3].tolist() == [4, 15, 2]  # e = -1: 2.0, -6.0, 1.0
    assert torch.isnan(mxfp4.dequantize(q)[0, 32:64]).all()


# ---- ScaleRule.FLOOR --------------------------------------------------------------------------

@pytest.mark.parametrize("amax, aiter_byte, floor_byte", [
    (1.0, 125, 125),
    (1.5, 125, 125),
    (1.75, 126, 125),                    # AITER rounds amax up, FLOOR does not
    (1.9921875 * 2.0 ** 127, 254, 252),
    (2.0 ** -130, 0, 0),
    (0.0, 0, 0),
])
def test_floor_rule(amax, aiter_byte, floor_byte):
    assert codes_and_scales(block([amax]))[1] == [[aiter_byte]]
    assert codes_and_scales(block([amax]), ScaleRule.FLOOR)[1] == [[floor_byte]]


def test_floor_rule_is_carried_by_the_tensor():
    q = mxfp4.quantize(block([1.0]), ScaleRule.FLOOR)
    assert q.scale_rule is ScaleRule.FLOOR


# ---- zero-size inputs -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 64), (3, 0), (2, 0, 32)])
def test_zero_size_inputs(shape):
    x = torch.empty(shape, dtype=torch.bfloat16)
    q = mxfp4.quantize(x)
    assert q.shape == shape
    assert tuple(q.data.shape) == (*shape[:-1], shape[-1] // 2)
    assert tuple(q.scales.shape) == (*shape[:-1], shape[-1] // 32)
    assert mxfp4.dequantize(q).shape == shape


# ---- dequantize -------------------------------------------------------------------------------

def _every_byte_times_every_code() -> tuple[MXFP4Tensor, list[list[float]]]:
    """Row b: scale byte b, codes 0..15 twice; expected values written with math.ldexp."""
    codes = torch.arange(16, dtype=torch.uint8).repeat(256, 2)
    scales = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(256, 1)
    t = MXFP4Tensor(pack_codes(codes), scales, (256, 32))
    expected = []
    for b in range(256):
        row = [math.copysign(math.ldexp(E2M1[c % 8], b - 127), -1.0 if c >= 8 else 1.0) for c in range(16)]
        expected.append(2 * ([math.nan] * 16 if b == 255 else row))
    return t, expected


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_dequantize_every_e8m0_byte_and_code(dtype):
    """2**(b - 127) times the code value (signed zeros kept, byte 0 = 2**-127, 255 = NaN); float32
    products above the float32 range are Inf, as the exact value rounded to float32."""
    t, expected = _every_byte_times_every_code()
    got = mxfp4.dequantize(t, dtype)
    want = torch.tensor(expected, dtype=torch.float64).to(dtype)
    assert got.dtype == dtype
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    int_type = torch.int64 if dtype == torch.float64 else torch.int32
    assert torch.equal(got[~nan].view(int_type), want[~nan].view(int_type))  # bitwise: signs of zero too
    assert got[0, 1].item() == 2.0 ** -128 and got[252, 7].item() == 6 * 2.0 ** 125
    assert got[254, 7].item() == (math.inf if dtype == torch.float32 else 6 * 2.0 ** 127)


def test_dequantize_round_trips_exact_values():
    """Values that are already e2m1 times a power of two come back unchanged."""
    x = block([6.0, -4.0, 3.0, 1.5, -0.5, 0.0, 2.0 ** -1]) * 2.0 ** 40
    assert torch.equal(mxfp4.dequantize(mxfp4.quantize(x)), x)


# ---- packing ----------------------------------------------------------------------------------

def test_pack_puts_element_2i_in_the_low_nibble():
    codes = torch.randint(0, 16, (5, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    packed = pack_codes(codes)
    assert tuple(packed.shape) == (5, 32)
    assert torch.equal(packed & 0xF, codes[:, 0::2]) and torch.equal(packed >> 4, codes[:, 1::2])
    assert torch.equal(unpack_codes(packed), codes)


def test_quantize_packs_low_nibble_first():
    x = block([1.0, 0.0, 0.0, -6.0, 0.0, 0.0])  # codes 2, 0 | 0, 15
    assert mxfp4.quantize(x).data[0, :3].tolist() == [0x02, 0xF0, 0x00]


# ---- input errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("x", [torch.ones(2, 32, dtype=torch.int32), torch.ones(2, 32, dtype=torch.uint8),
                               torch.ones(2, 32, dtype=torch.float64)])
def test_quantize_rejects_other_dtypes(x):
    with pytest.raises(TypeError, match=r"\bx\b"):
        mxfp4.quantize(x)


def test_quantize_rejects_non_tensors_scalars_and_ragged_k():
    with pytest.raises(TypeError, match=r"\bx\b"):
        mxfp4.quantize([[1.0] * 32])
    with pytest.raises(ValueError, match="scalar"):
        mxfp4.quantize(torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"K = 48"):
        mxfp4.quantize(torch.ones(2, 48))
    with pytest.raises(TypeError, match="scale_rule"):
        mxfp4.quantize(torch.ones(2, 32), "aiter")


def test_dequantize_rejects_other_inputs():
    with pytest.raises(TypeError, match="MXFP4Tensor"):
        mxfp4.dequantize(torch.ones(2, 32))
    with pytest.raises(TypeError, match="dtype"):
        mxfp4.dequantize(mxfp4.quantize(torch.ones(2, 32)), torch.bfloat16)


def test_mxfp4tensor_layout_is_plain_after_quantize():
    assert mxfp4.quantize(torch.ones(2, 32)).layout is Layout.PLAIN
