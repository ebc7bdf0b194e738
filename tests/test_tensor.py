"""MXFP4Tensor, quantize / dequantize and prepare: validation and round trips; on a Hopper GPU (marker
gpu) the quantize kernel on every bf16 pattern."""
import pytest
import torch

import mxfp4
from mxfp4 import Layout, formats


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


@pytest.mark.parametrize("n, k", [(8, 64), (16, 32), (1000, 512), (40, 96), (7, 32), (300, 160)])
def test_prepare_pads_any_shape_with_zero_blocks(n, k):
    t = mxfp4.quantize(torch.randn(n, k))
    p = mxfp4.prepare(t)
    n16, k64 = -(-n // 16) * 16, -(-k // 64) * 64
    assert p.shape == (n, k) and tuple(p.data.shape) == (n16, k64 // 2)
    assert torch.equal(mxfp4.dequantize(p), mxfp4.dequantize(t))
    back = p.to_layout(Layout.PLAIN)
    assert torch.equal(back.data, t.data) and torch.equal(back.scales, t.scales)
    # the padding is zero codes at scale byte 127: its blocks are zero
    full = mxfp4.MXFP4Tensor(p.data, p.scales, (n16, k64), Layout.AITER_SHUFFLED).to_layout(Layout.PLAIN)
    assert (full.data[n:] == 0).all() and (full.data[:, k // 2:] == 0).all()
    assert (full.scales[n:] == 127).all() and (full.scales[:, k // 32:] == 127).all()


def test_shuffled_tensor_checks_the_padded_shape():
    p = mxfp4.prepare(mxfp4.quantize(torch.randn(40, 96)))
    with pytest.raises(ValueError, match=r"MXFP4Tensor.data must have shape \(48, 64\)"):
        mxfp4.MXFP4Tensor(p.data[:40], p.scales, (40, 96), Layout.AITER_SHUFFLED)


def test_dequantize_float64_keeps_large_blocks():
    x = torch.full((1, 32), 3.4e38)
    assert torch.isfinite(mxfp4.dequantize(mxfp4.quantize(x), torch.float64)).all()


def test_quantize_errors_name_the_argument():
    with pytest.raises(ValueError, match="multiple of 32"):
        mxfp4.quantize(torch.randn(4, 33))
    with pytest.raises(TypeError, match="x must be"):
        mxfp4.quantize(torch.zeros(4, 32, dtype=torch.int32))


def test_the_fast_check_takes_only_exact_int_shapes_of_the_right_sizes():
    """A shape seen before, with float or bool entries or a scale array one row short, still fails its rule."""
    p = mxfp4.prepare(mxfp4.quantize(torch.randn(64, 128)))
    mxfp4.MXFP4Tensor(p.data, p.scales, (64, 128), Layout.AITER_SHUFFLED)
    with pytest.raises(TypeError, match="shape must be a tuple of non-negative ints"):
        mxfp4.MXFP4Tensor(p.data, p.scales, (64.0, 128), Layout.AITER_SHUFFLED)
    with pytest.raises(ValueError, match="MXFP4Tensor.scales must have shape"):
        mxfp4.MXFP4Tensor(p.data, p.scales[:-1], (64, 128), Layout.AITER_SHUFFLED)
    with pytest.raises(TypeError, match="MXFP4Tensor.data must be uint8"):
        mxfp4.MXFP4Tensor(p.data.view(torch.int8), p.scales, (64, 128), Layout.AITER_SHUFFLED)
    t = mxfp4.MXFP4Tensor(p.data, p.scales, [64, 128], Layout.AITER_SHUFFLED)  # a list becomes a tuple
    assert t.shape == (64, 128) and type(t.shape) is tuple

# ---- on a Hopper GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
def test_quantize_kernel_every_bf16_pattern():
    x = torch.arange(0, 65536, dtype=torch.int32, device="cuda").to(torch.int16).view(torch.bfloat16).reshape(-1, 64)
    q = mxfp4.quantize(x)
    codes, scales = formats.quantize_codes(x)
    assert torch.equal(q.data, formats.pack_codes(codes)) and torch.equal(q.scales, scales)
