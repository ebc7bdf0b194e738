"""aiter's weight and scale layouts: equal to the task's reference, invertible, padded with 127, validated."""
from __future__ import annotations

import pytest
import torch

import mxfp4
from mxfp4 import Layout, MXFP4Tensor
from mxfp4.layouts import (SCALE_PAD_VALUE, shuffle_scales, shuffle_weight, shuffled_scale_shape, unshuffle_scales,
                           unshuffle_weight)

ROWS = (16, 32, 48, 256, 272, 544)
K_VALUES = (64, 320, 512, 1536, 7168)  # K = 320: 10 scale columns, not a multiple of 8


def random_bytes(*shape: int, seed: int = 0, high: int = 256) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g, dtype=torch.int32).to(torch.uint8)


def random_scales(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    """Scale bytes that are never the padding value, so padding can be told apart."""
    s = random_bytes(rows, cols, seed=seed, high=255)
    return torch.where(s == SCALE_PAD_VALUE, torch.full_like(s, 200), s)


# ---- against the task's reference -------------------------------------------------------------

@pytest.mark.parametrize("k", K_VALUES)
@pytest.mark.parametrize("rows", ROWS)
def test_shuffle_weight_matches_task_reference(old_ref, rows, k):
    data = random_bytes(rows, k // 2, seed=rows + k)
    assert torch.equal(shuffle_weight(data), old_ref.shuffle_weights(data, (16, 16)))


@pytest.mark.parametrize("k", K_VALUES)
@pytest.mark.parametrize("rows", ROWS)
def test_shuffle_scales_matches_task_reference(old_ref, rows, k):
    """The task's shuffle_scales takes N_actual = K in elements, not scale columns."""
    scales = random_scales(rows, k // 32, seed=rows * k)
    want = old_ref.shuffle_scales(scales, M_actual=rows, N_actual=k)
    got = shuffle_scales(scales)
    assert tuple(got.shape) == tuple(want.shape) == shuffled_scale_shape(rows, k // 32)
    assert torch.equal(got, want)


def test_scale_offset_formula_from_the_docstring():
    """Row r, column c lands at the flat offset stated in mxfp4/layouts.py (independent of the task file)."""
    rows, cols = 300, 11
    scales = random_scales(rows, cols, seed=3)
    prow, pcol = shuffled_scale_shape(rows, cols)
    flat = shuffle_scales(scales).reshape(-1)
    for r in (0, 1, 15, 16, 31, 32, 255, 256, 299):
        for c in (0, 3, 4, 7, 8, 10):
            off = ((r % 32) // 16 + 2 * ((c % 8) // 4) + 4 * (r % 16) + 64 * (c % 4) + 256 * (c // 8)
                   + 32 * pcol * (r // 32))
            assert flat[off] == scales[r, c], (r, c)


def test_weight_shuffle_keeps_each_mx_block_contiguous():
    """Each run of 16 shuffled bytes is one 32-element block of one row (tile 0: rows 0..15, bytes 0..31)."""
    data = random_bytes(32, 64, seed=4)
    sh = shuffle_weight(data).reshape(-1, 16)
    assert torch.equal(sh[0], data[0, :16]) and torch.equal(sh[1], data[1, :16])
    assert torch.equal(sh[16], data[0, 16:32]) and torch.equal(sh[32], data[0, 32:48])


# ---- round trips and padding ------------------------------------------------------------------

@pytest.mark.parametrize("cols", [1, 3, 8, 9, 17])
@pytest.mark.parametrize("rows", [1, 7, 16, 48, 272, 300])
def test_unshuffle_scales_round_trip(rows, cols):
    scales = random_scales(rows, cols, seed=rows + 31 * cols)
    sh = shuffle_scales(scales)
    assert tuple(sh.shape) == shuffled_scale_shape(rows, cols)
    assert torch.equal(unshuffle_scales(sh, rows, cols), scales)


@pytest.mark.parametrize("rows, cols", [(16, 1), (48, 3), (272, 9), (16, 17), (257, 8)])
def test_scale_padding_is_127(rows, cols):
    """Everything outside the [rows, cols] corner of the padded array is the e8m0 byte for 1.0."""
    scales = random_scales(rows, cols, seed=5)
    prow, pcol = shuffled_scale_shape(rows, cols)
    padded = unshuffle_scales(shuffle_scales(scales), prow, pcol)
    assert torch.equal(padded[:rows, :cols], scales)
    outside = torch.ones(prow, pcol, dtype=torch.bool)
    outside[:rows, :cols] = False
    assert (padded[outside] == 127).all()
    assert int((shuffle_scales(scales) == 127).sum()) == prow * pcol - rows * cols


@pytest.mark.parametrize("rows, kb", [(16, 32), (48, 96), (272, 160), (544, 3584)])
def test_unshuffle_weight_round_trip(rows, kb):
    data = random_bytes(rows, kb, seed=rows + kb)
    sh = shuffle_weight(data)
    assert not torch.equal(sh, data)
    assert torch.equal(unshuffle_weight(sh), data)


# ---- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [shuffle_weight, unshuffle_weight])
def test_weight_shuffle_errors(fn):
    with pytest.raises(ValueError, match=r"N = 24"):
        fn(torch.zeros(24, 32, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"K/2 = 48"):
        fn(torch.zeros(16, 48, dtype=torch.uint8))
    with pytest.raises(TypeError, match="uint8"):
        fn(torch.zeros(16, 32, dtype=torch.int8))
    with pytest.raises(ValueError, match="2-D"):
        fn(torch.zeros(2, 16, 32, dtype=torch.uint8))
    with pytest.raises(TypeError, match="torch.Tensor"):
        fn([[0] * 32] * 16)


def test_scale_shuffle_errors():
    with pytest.raises(TypeError, match="uint8"):
        shuffle_scales(torch.zeros(16, 2, dtype=torch.float32))
    with pytest.raises(ValueError, match="2-D"):
        shuffle_scales(torch.zeros(16, dtype=torch.uint8))
    sh = shuffle_scales(torch.zeros(16, 2, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"\(256, 8\)"):
        unshuffle_scales(sh[:128], 16, 2)
    with pytest.raises(ValueError, match=r"\(256, 16\)"):
        unshuffle_scales(sh, 16, 9)
    with pytest.raises(ValueError, match="non-negative"):
        unshuffle_scales(sh, -1, 2)
    with pytest.raises(TypeError, match="uint8"):
        unshuffle_scales(sh.to(torch.int16), 16, 2)


# ---- MXFP4Tensor.to_layout --------------------------------------------------------------------

@pytest.mark.parametrize("n, k", [(16, 64), (48, 320), (272, 1536)])
def test_to_layout_round_trip(n, k):
    x = torch.randn(n, k, generator=torch.Generator().manual_seed(n), dtype=torch.float32).to(torch.bfloat16)
    plain = mxfp4.quantize(x)
    sh = plain.to_layout(Layout.AITER_SHUFFLED)
    assert sh.layout is Layout.AITER_SHUFFLED and sh.shape == (n, k)
    assert torch.equal(sh.data, shuffle_weight(plain.data))
    assert torch.equal(sh.scales, shuffle_scales(plain.scales))
    back = sh.to_layout(Layout.PLAIN)
    assert torch.equal(back.data, plain.data) and torch.equal(back.scales, plain.scales)
    assert torch.equal(mxfp4.dequantize(sh), mxfp4.dequantize(plain))
    assert plain.to_layout(Layout.PLAIN) is plain


def test_shuffled_tensor_validates_its_shape():
    plain = mxfp4.quantize(torch.ones(16, 64))
    sh = plain.to_layout(Layout.AITER_SHUFFLED)
    with pytest.raises(ValueError, match="scales"):
        MXFP4Tensor(sh.data, plain.scales, (16, 64), Layout.AITER_SHUFFLED)
    with pytest.raises(ValueError, match="2-D"):
        MXFP4Tensor(sh.data, sh.scales, (1, 16, 64), Layout.AITER_SHUFFLED)
