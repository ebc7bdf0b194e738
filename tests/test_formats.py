"""mxfp4.formats against a brute-force oracle: scale rule, nearest e2m1 with ties to even, specials."""
import math
import random

import torch

from mxfp4 import formats
from mxfp4.formats import E2M1_VALUES, ScaleRule


def oracle_block(xs: list[float]) -> tuple[list[int], int]:
    """Codes and scale byte of one block by the task's rule, by search over the 8 magnitudes."""
    if any(math.isnan(x) or math.isinf(x) for x in xs):
        return [0] * len(xs), 255
    amax = max(abs(x) for x in xs)
    bits = int(torch.tensor(amax, dtype=torch.float32).view(torch.int32))
    biased = (bits + 0x200000) >> 23
    e = 127 if biased == 255 else max(-127, min(127, biased - 129))
    codes = []
    for x in xs:
        q = abs(x) / 2.0 ** e
        best = min(range(8), key=lambda c: (abs(E2M1_VALUES[c] - q), c % 2))  # ties: the even code
        codes.append(best | (8 if math.copysign(1.0, x) < 0 else 0))
    return codes, e + 127


def test_quantize_matches_brute_force_oracle():
    rng = random.Random(7)
    blocks = []
    for _ in range(300):
        e = rng.randint(-140, 125)
        blocks.append([rng.gauss(0, 1) * 2.0 ** e for _ in range(32)])
    # exact midpoints, saturation, zeros, subnormals, negative zero
    blocks.append([m * 2.0 ** 3 * s for m, _ in formats.MIDPOINTS for s in (1, -1)] + [6.0 * 8] * 18)
    blocks.append([0.0] * 31 + [-0.0])
    blocks.append([2.0 ** -133 * (i + 1) for i in range(32)])
    blocks.append([3.0e38] + [1.0] * 31)
    blocks.append([float("nan")] + [1.0] * 31)
    blocks.append([float("-inf")] + [1.0] * 31)
    x = torch.tensor(blocks, dtype=torch.float32)
    codes, scales = formats.quantize_codes(x, ScaleRule.AITER)
    for i, block in enumerate(x.tolist()):
        want_codes, want_scale = oracle_block(block)
        assert scales[i].item() == want_scale, (i, block[:4])
        assert codes[i].tolist() == want_codes, (i, block[:4])


def test_pack_unpack_roundtrip():
    codes = torch.randint(0, 16, (5, 64), dtype=torch.uint8)
    packed = formats.pack_codes(codes)
    assert packed[0, 0].item() == codes[0, 0].item() | (codes[0, 1].item() << 4)
    assert torch.equal(formats.unpack_codes(packed), codes)


def test_e8m0_values():
    b = torch.arange(256, dtype=torch.uint8)
    v = formats.e8m0_to_float(b, torch.float64)
    assert v[0].item() == 2.0 ** -127 and v[127].item() == 1.0 and v[254].item() == 2.0 ** 127
    assert math.isnan(v[255].item())


# ---- fp16 / float32 activations for the bf16 kernels: their quantized values in bf16 -----------------

def _values_check(x: torch.Tensor) -> None:
    """quantized_values_bf16(x) is dequant(quant(x)) exactly, and quantizing it again keeps the values;
    blocks reaching formats.KERNEL_INPUT_LIMIT come out Inf and are the only exception."""
    import mxfp4

    got = formats.quantized_values_bf16(x)
    assert got.dtype == torch.bfloat16 and got.shape == x.shape
    want = mxfp4.dequantize(mxfp4.quantize(x), torch.float64)
    limit = ((x.double().abs() >= formats.KERNEL_INPUT_LIMIT) & torch.isfinite(x)).reshape(-1, 32).any(-1)
    limit = limit.repeat_interleave(32).reshape(x.shape)
    g = got.double()
    same = (g == want) | (torch.isnan(g) & torch.isnan(want))
    assert same[~limit].all()
    assert torch.isinf(g[limit & (want.abs() == 2.0 ** 128)]).all()
    again = mxfp4.dequantize(mxfp4.quantize(got), torch.float64)
    assert (((again == g) | (torch.isnan(again) & torch.isnan(g)))[~limit]).all()


def test_quantized_values_bf16_every_fp16_pattern():
    x = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16).view(torch.float16)
    _values_check(x.reshape(-1, 32))
    g = torch.Generator().manual_seed(0)
    for _ in range(4):  # the same values in other blocks: other scales
        _values_check(x[torch.randperm(65536, generator=g)].reshape(-1, 64))


def test_quantized_values_bf16_float32_edges():
    g = torch.Generator().manual_seed(1)
    bits = torch.randint(0, 2 ** 32, (8192, 32), generator=g, dtype=torch.int64).to(torch.int32)
    _values_check(bits.view(torch.float32))  # every exponent, NaN and Inf among them
    # each scale exponent with each code as the block's largest value, and the midpoints below it
    e = torch.arange(-140, 128, dtype=torch.float64)
    grid = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0],
                        dtype=torch.float64)
    for top in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0):
        block = torch.cat((grid[grid <= top], torch.full((32 - int((grid <= top).sum()),), top,
                                                         dtype=torch.float64)))
        x = (block * torch.pow(2.0, e).unsqueeze(1)).clamp(max=3.4028234663852886e38).to(torch.float32)
        _values_check(torch.cat((x, -x), 0))
    special = torch.zeros(6, 32)
    special[1, 3] = float("nan")
    special[2, 0] = float("inf")
    special[3] = -0.0
    special[4, 5] = 1e-45  # the smallest subnormal
    special[5] = torch.tensor(3.4028234663852886e38)  # the largest float32: the one edge
    _values_check(special)


def test_fp16_and_fp32_give_the_gemm_of_their_bf16_values():
    """The kernels' path (a's quantized values in bf16, then the bf16 GEMM) is exact: on the reference,
    bit for bit the product of a as given."""
    import mxfp4
    from mxfp4 import reference

    g = torch.Generator().manual_seed(2)
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(48, 256, generator=g).bfloat16()))
    for dtype in (torch.float16, torch.float32):
        a = (torch.randn(5, 256, generator=g) * torch.pow(2.0, torch.randint(-12, 12, (5, 256), generator=g))).to(dtype)
        a[1, :32] = float("nan")
        want = reference.gemm_a4w4(a, w)
        got = reference.gemm_a4w4(formats.quantized_values_bf16(a), w)
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())
