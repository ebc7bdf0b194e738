"""MXFP4Tensor, quantize / dequantize and prepare: validation and round trips."""
import pytest
import torch

import mxfp4
from mxfp4 import Layout


def test_to_layout_rejects_non_layouts():
    t = mxfp4.quantize(torch.randn(16, 64))
    for bad in ("plain", None, "aiter_shuffled", 1):
        with pytest.raises(TypeError, match="layout must be a mxfp4.Layout"):
            t.to_layout(bad)


def test_prepare_roundtrip_and_size():
    t = mxfp4.quantize(torch.randn(48, 128))
    p = mxfp4.prepare(t)
    assert p.layout is Layout.AITER_SHUFFLED and mxfp4.prepare(p) is p
    assert torch.equal(mxfp4.dequantize(p), mxfp4.dequantize(t))
    assert p.data.numel() == 48 * 64 and p.scales.numel() == 256 * 8  # aiter pads scales to 256 x 8


@pytest.mark.parametrize("shape, rule", [((8, 64), "N % 16"), ((16, 32), "K % 64")])
def test_prepare_rejects_bad_shapes(shape, rule):
    with pytest.raises(ValueError, match="N % 16 == 0 and K % 64 == 0"):
        mxfp4.prepare(mxfp4.quantize(torch.randn(*shape)))


def test_dequantize_float64_keeps_large_blocks():
    x = torch.full((1, 32), 3.4e38)
    assert torch.isfinite(mxfp4.dequantize(mxfp4.quantize(x), torch.float64)).all()


def test_quantize_errors_name_the_argument():
    with pytest.raises(ValueError, match="multiple of 32"):
        mxfp4.quantize(torch.randn(4, 33))
    with pytest.raises(TypeError, match="x must be"):
        mxfp4.quantize(torch.zeros(4, 32, dtype=torch.int32))
