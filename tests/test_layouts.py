"""aiter's layouts: round trips and the documented offsets."""
import pytest
import torch

from mxfp4 import layouts


def test_weight_shuffle_roundtrip_and_blocks():
    data = torch.randint(0, 256, (48, 96), dtype=torch.uint8)
    sh = layouts.shuffle_weight(data)
    assert torch.equal(layouts.unshuffle_weight(sh), data)
    # each 16-row group's block b is 256 contiguous bytes: 16 rows x 16 bytes
    flat = sh.reshape(-1)
    group, block = 2, 5
    base = group * 16 * 96 + block * 256
    for r in range(16):
        assert torch.equal(flat[base + r * 16: base + r * 16 + 16], data[group * 16 + r, block * 16: block * 16 + 16])


def test_scale_shuffle_offsets():
    rows, cols = 300, 20
    s = torch.randint(0, 255, (rows, cols), dtype=torch.uint8)
    sh = layouts.shuffle_scales(s)
    prow, pcol = layouts.shuffled_scale_shape(rows, cols)
    assert sh.shape == (prow, pcol) == (512, 24)
    flat = sh.reshape(-1)
    for r, c in ((0, 0), (17, 3), (31, 7), (299, 19), (128, 9)):
        off = (r % 32) // 16 + 2 * ((c % 8) // 4) + 4 * (r % 16) + 64 * (c % 4) + 256 * (c // 8) + 32 * pcol * (r // 32)
        assert flat[off].item() == s[r, c].item()
    assert torch.equal(layouts.unshuffle_scales(sh, rows, cols), s)


def test_bad_layout_inputs():
    with pytest.raises(ValueError, match="multiple of 16"):
        layouts.shuffle_weight(torch.zeros(8, 32, dtype=torch.uint8))
    with pytest.raises(TypeError, match="uint8"):
        layouts.shuffle_weight(torch.zeros(16, 32))
