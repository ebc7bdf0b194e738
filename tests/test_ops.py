"""mxfp4.gemm_a4w4 on CPU (backend auto = reference): results, `out=`, and every documented input error.

Each bad input must raise the documented exception type with a message naming the argument.
"""
from __future__ import annotations

import pytest
import torch

import mxfp4
import mxfp4.launch
from mxfp4 import KernelConfig, Layout, MXFP4Tensor
from mxfp4.ops import select_backend
from mxfp4.reference import gemm_a4w4 as reference_gemm
from mxfp4.testing import check_gemm


@pytest.fixture
def operands() -> tuple[torch.Tensor, MXFP4Tensor]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(7, 128, generator=g).to(torch.bfloat16)
    w = mxfp4.quantize(torch.randn(48, 128, generator=g).to(torch.bfloat16))
    return a, w


# ---- results ----------------------------------------------------------------------------------

def test_cpu_dispatches_to_the_reference(operands):
    a, w = operands
    assert select_backend(a) == "reference"
    out = mxfp4.gemm_a4w4(a, w)
    assert out.dtype == torch.bfloat16 and out.shape == (7, 48)
    assert torch.equal(out, reference_gemm(a, w))
    assert torch.equal(mxfp4.gemm_a4w4(a, w, backend="reference"), out)
    assert check_gemm(out, a, w).passed


def test_shuffled_weight_and_batch_dims(operands):
    a, w = operands
    out = mxfp4.gemm_a4w4(a, w)
    assert torch.equal(mxfp4.gemm_a4w4(a, w.to_layout(Layout.AITER_SHUFFLED)), out)
    a3 = torch.cat([a, a[:5]]).reshape(3, 4, 128)
    out3 = mxfp4.gemm_a4w4(a3, w)
    assert out3.shape == (3, 4, 48) and torch.equal(out3.reshape(12, 48)[:7], out)


def test_out_is_written_and_returned(operands):
    """`out` is poisoned with NaN first, so a pass means every element was written."""
    a, w = operands
    out = torch.full((7, 48), float("nan"), dtype=torch.bfloat16)
    result = mxfp4.gemm_a4w4(a, w, out)
    assert result is out
    assert torch.equal(out, reference_gemm(a, w))


def test_empty_m(operands):
    _, w = operands
    out = mxfp4.gemm_a4w4(torch.empty(0, 128, dtype=torch.bfloat16), w)
    assert out.shape == (0, 48) and out.dtype == torch.bfloat16


def test_a_valid_config_is_accepted_on_the_reference_path(operands):
    a, w = operands
    assert torch.equal(mxfp4.gemm_a4w4(a, w, config=KernelConfig(block_m=32, split_k=2)),
                       mxfp4.gemm_a4w4(a, w))


# ---- input errors -----------------------------------------------------------------------------

def test_a_wrong_dtype(operands):
    a, w = operands
    with pytest.raises(TypeError, match=r"\ba\b.*int8"):
        mxfp4.gemm_a4w4(torch.ones(7, 128, dtype=torch.int8), w)
    with pytest.raises(TypeError, match=r"\ba\b.*torch.Tensor"):
        mxfp4.gemm_a4w4(a.tolist(), w)


def test_a_scalar(operands):
    _, w = operands
    with pytest.raises(ValueError, match=r"\ba\b.*scalar"):
        mxfp4.gemm_a4w4(torch.tensor(1.0, dtype=torch.bfloat16), w)


def test_w_not_an_mxfp4tensor(operands):
    a, w = operands
    with pytest.raises(TypeError, match=r"\bw\b.*MXFP4Tensor"):
        mxfp4.gemm_a4w4(a, torch.randn(48, 128, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match=r"\bw\b.*MXFP4Tensor"):
        mxfp4.gemm_a4w4(a, (w.data, w.scales))


def test_w_not_2d(operands):
    a, _ = operands
    w3 = mxfp4.quantize(torch.ones(2, 48, 128))
    with pytest.raises(ValueError, match=r"\bw\b.*2-D"):
        mxfp4.gemm_a4w4(a, w3)


def test_k_mismatch(operands):
    a, w = operands
    with pytest.raises(ValueError, match=r"a\.shape\[-1\].*K = 64.*128"):
        mxfp4.gemm_a4w4(a[:, :64], w)


@pytest.mark.parametrize("bad_out, match", [
    (torch.empty(7, 47, dtype=torch.bfloat16), r"\bout\b.*\(7, 48\)"),
    (torch.empty(48, 7, dtype=torch.bfloat16), r"\bout\b.*\(7, 48\)"),
    (torch.empty(7, 48, dtype=torch.float32), r"\bout\b.*bfloat16"),
    (torch.empty(48, 7, dtype=torch.bfloat16).T, r"\bout\b.*contiguous"),
])
def test_out_wrong_shape_dtype_or_strides(operands, bad_out, match):
    a, w = operands
    with pytest.raises(ValueError, match=match):
        mxfp4.gemm_a4w4(a, w, bad_out)


def test_out_not_a_tensor(operands):
    a, w = operands
    with pytest.raises(TypeError, match=r"\bout\b"):
        mxfp4.gemm_a4w4(a, w, [[0.0] * 48] * 7)


def test_backend_name(operands):
    a, w = operands
    with pytest.raises(ValueError, match=r"backend.*'cuda'"):
        mxfp4.gemm_a4w4(a, w, backend="cuda")


def test_config_type(operands):
    a, w = operands
    with pytest.raises(TypeError, match=r"config.*dict"):
        mxfp4.gemm_a4w4(a, w, config={"block_m": 16})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to put data and scales apart")
def test_data_and_scales_on_different_devices(operands):
    _, w = operands
    with pytest.raises(ValueError, match=r"data.*scales.*one device"):
        MXFP4Tensor(w.data.cuda(), w.scales, w.shape)


# ---- MXFP4Tensor construction -----------------------------------------------------------------

def test_scales_too_small_for_data(operands):
    _, w = operands
    with pytest.raises(ValueError, match="scales"):
        MXFP4Tensor(w.data, w.scales[:, :3], w.shape)
    with pytest.raises(ValueError, match="scales"):
        MXFP4Tensor(w.data, w.scales[:47], w.shape)


def test_data_shape_and_dtypes(operands):
    _, w = operands
    with pytest.raises(ValueError, match="data"):
        MXFP4Tensor(w.data[:, :60], w.scales, w.shape)
    with pytest.raises(TypeError, match=r"data.*uint8"):
        MXFP4Tensor(w.data.to(torch.int16), w.scales, w.shape)
    with pytest.raises(TypeError, match=r"scales.*uint8"):
        MXFP4Tensor(w.data, w.scales.float(), w.shape)
    with pytest.raises(ValueError, match=r"K % 32"):
        MXFP4Tensor(w.data, w.scales, (48, 100))
    with pytest.raises(TypeError, match="layout"):
        MXFP4Tensor(w.data, w.scales, w.shape, "plain")
    with pytest.raises(TypeError, match="scale_rule"):
        MXFP4Tensor(w.data, w.scales, w.shape, Layout.PLAIN, "aiter")


@pytest.mark.parametrize("n, k, match", [(40, 128, r"N % 16.*N = 40"), (48, 96, r"K % 64.*K = 96")])
def test_shuffled_layout_needs_n16_and_k64(n, k, match):
    plain = mxfp4.quantize(torch.ones(n, k))
    with pytest.raises(ValueError, match=match):
        MXFP4Tensor(plain.data, plain.scales, (n, k), Layout.AITER_SHUFFLED)


# ---- KernelConfig -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"block_m": 24}, r"block_m.*24"),
    ({"block_n": 8}, r"block_n.*8"),
    ({"split_k": 0}, r"split_k.*0"),
    ({"num_warps": 3}, r"num_warps.*3"),
    ({"num_stages": True}, r"num_stages.*True"),
])
def test_kernel_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KernelConfig(**kwargs)


def test_kernel_config_dict_round_trip():
    cfg = KernelConfig(block_m=32, block_n=128, split_k=4, num_warps=8, num_stages=2)
    assert KernelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown KernelConfig fields"):
        KernelConfig.from_dict({"block_mm": 16})


def test_kernel_rejects_shapes_beyond_32_bit_indexing():
    """A [2**16, 2**15] activation would overflow the kernel's int32 offsets: a clear error, no launch.
    (Checked with a meta tensor, so nothing is allocated.)"""
    a = torch.empty(2 ** 16, 2 ** 15, dtype=torch.bfloat16, device="meta")
    w = mxfp4.MXFP4Tensor(torch.empty(16, 2 ** 14, dtype=torch.uint8, device="meta"),
                          torch.empty(16, 2 ** 10, dtype=torch.uint8, device="meta"), (16, 2 ** 15))
    out = torch.empty(2 ** 16, 16, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match="32-bit offsets"):
        mxfp4.launch.plan_a4w4(a, w, out, mxfp4.KernelConfig())
