"""mxfp4.gemm_a4w4: argument checks, backend choice and the torch op (CPU)."""
import pytest
import torch

import mxfp4
from mxfp4 import ops, reference


def operands(m=4, n=32, k=128):
    return torch.randn(m, k).bfloat16(), mxfp4.prepare(mxfp4.quantize(torch.randn(n, k).bfloat16()))


def test_cpu_call_is_the_reference():
    a, w = operands()
    assert torch.equal(mxfp4.gemm_a4w4(a, w), reference.gemm_a4w4(a, w))
    out = torch.empty(4, 32, dtype=torch.bfloat16)
    assert mxfp4.gemm_a4w4(a, w, out) is out


def test_out_aliasing_a_is_rejected():
    a = torch.randn(4, 128).bfloat16()
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(128, 128).bfloat16()))
    with pytest.raises(ValueError, match="out must not overlap a"):
        mxfp4.gemm_a4w4(a, w, out=a)


@pytest.mark.parametrize("bad, err, match", [
    (lambda a, w: (a.float().int(), w), TypeError, "a must be bfloat16"),
    (lambda a, w: (a[:, :64], w), ValueError, "must equal w's K"),
    (lambda a, w: (a, w.data), TypeError, "w must be an MXFP4Tensor"),
    (lambda a, w: (torch.tensor(1.0), w), ValueError, "scalar"),
])
def test_bad_operands(bad, err, match):
    a, w = operands()
    with pytest.raises(err, match=match):
        mxfp4.gemm_a4w4(*bad(a, w))


def test_backend_choice_on_cpu():
    a, w = operands()
    assert ops.select_backend(a, w, "auto") == "reference"
    with pytest.raises(ValueError, match="Hopper"):
        ops.select_backend(a, w, "cuda")
    with pytest.raises(ValueError, match="backend must be one of"):
        ops.select_backend(a, w, "triton")


def test_params_type_checked():
    a, w = operands()
    with pytest.raises(TypeError, match="GemmParams"):
        mxfp4.gemm_a4w4(a, w, params={"bn": 64})


def test_torch_op_and_compile_on_cpu():
    a, w = operands(3, 32, 64)
    got = ops.gemm_a4w4_op(a, w)
    assert torch.equal(got, reference.gemm_a4w4(a, w))
    torch.library.opcheck(torch.ops.mxfp4.gemm_a4w4.default,
                          (a, w.data, w.scales, 32, 64, True, False), test_utils=("test_schema", "test_faketensor"))
