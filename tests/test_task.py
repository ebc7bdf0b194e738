"""The competition interface on CPU: generate_input's five tensors and custom_kernel's result."""
from __future__ import annotations

import pytest
import torch

import mxfp4
from mxfp4 import task
from mxfp4.layouts import shuffle_weight, shuffled_scale_shape, unshuffle_scales
from mxfp4.reference import gemm_a4w4 as reference_gemm
from mxfp4.testing import check_gemm

SHAPES = [(8, 64, 128, 1), (33, 48, 512, 2), (1, 16, 64, 3)]


@pytest.mark.parametrize("m, n, k, seed", SHAPES)
def test_generate_input_tensors(m, n, k, seed):
    """Shapes, dtypes and layouts of (A, B, B_q, B_shuffle, B_scale_sh), each derived from B as the task states."""
    a, b, b_q, b_shuffle, b_scale_sh = task.generate_input(m, n, k, seed, device="cpu")
    assert (a.shape, a.dtype) == ((m, k), torch.bfloat16)
    assert (b.shape, b.dtype) == ((n, k), torch.bfloat16)
    for t in (b_q, b_shuffle):
        assert (t.shape, t.dtype) == ((n, k // 2), torch.uint8)
    assert (tuple(b_scale_sh.shape), b_scale_sh.dtype) == (shuffled_scale_shape(n, k // 32), torch.uint8)

    bq = mxfp4.quantize(b)
    assert torch.equal(b_q, bq.data)
    assert torch.equal(b_shuffle, shuffle_weight(b_q))
    assert torch.equal(unshuffle_scales(b_scale_sh, n, k // 32), bq.scales)


def test_generate_input_is_seeded():
    first = task.generate_input(8, 64, 128, 7, device="cpu")
    again = task.generate_input(8, 64, 128, 7, device="cpu")
    other = task.generate_input(8, 64, 128, 8, device="cpu")
    assert all(torch.equal(x, y) for x, y in zip(first, again))
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("m, n, k, seed", SHAPES)
def test_custom_kernel_equals_the_reference(m, n, k, seed):
    """Bit-exact with the reference on the plain weight, and inside the exact bound."""
    data = task.generate_input(m, n, k, seed, device="cpu")
    a, b = data[0], data[1]
    out = task.custom_kernel(data)
    assert (out.shape, out.dtype) == ((m, n), torch.bfloat16)
    w = mxfp4.quantize(b)
    assert torch.equal(out, reference_gemm(a, w))
    assert check_gemm(out, a, w).passed


@pytest.mark.parametrize("m, n, k, seed", SHAPES)
def test_task_tolerance_check_passes(m, n, k, seed):
    """The task's own check: allclose(rtol=atol=1e-2) against the float32 product of the quantized operands."""
    data = task.generate_input(m, n, k, seed, device="cpu")
    out = task.custom_kernel(data)
    expected = reference_gemm(data[0], mxfp4.quantize(data[1]), out_dtype=None)
    assert expected.dtype == torch.float32
    assert torch.allclose(out.float(), expected, rtol=1e-2, atol=1e-2)


def test_custom_kernel_uses_the_shuffled_operands():
    """custom_kernel reads B_shuffle and B_scale_sh (not B): scaling those scales doubles the output."""
    a, b, b_q, b_shuffle, b_scale_sh = task.generate_input(8, 64, 128, 4, device="cpu")
    out = task.custom_kernel((a, b, b_q, b_shuffle, b_scale_sh))
    doubled = task.custom_kernel((a, b, b_q, b_shuffle, b_scale_sh + 1))
    assert torch.equal(doubled, (out.double() * 2).to(torch.bfloat16))


def test_task_shape_tables():
    for m, n, k, _seed in task.TEST_SHAPES + task.BENCHMARK_SHAPES:
        assert k % 64 == 0 and n % 16 == 0 and m > 0


@pytest.mark.parametrize("m, n, k, match", [
    (0, 64, 128, r"\bm\b"),
    (8, -16, 128, r"\bn\b"),
    (8, 64, 0, r"\bk\b"),
    (8.0, 64, 128, r"\bm\b"),
    (8, 64, 96, r"\bk\b.*64"),
    (8, 40, 128, r"\bn\b.*16"),
])
def test_generate_input_rejects_bad_sizes(m, n, k, match):
    with pytest.raises(ValueError, match=match):
        task.generate_input(m, n, k, 0, device="cpu")


def test_weight_from_task_rejects_too_few_scale_columns():
    _a, _b, _bq, b_shuffle, b_scale_sh = task.generate_input(8, 64, 512, 5, device="cpu")
    with pytest.raises(ValueError, match="B_scale_sh"):
        task.weight_from_task(b_shuffle[:, :128], b_scale_sh, 1024)
