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
