"""MXFP4Linear against the reference GEMM."""
import pytest
import torch
from torch import nn

import mxfp4
from mxfp4.nn import MXFP4Linear


@pytest.mark.parametrize("n, k, bias", [(48, 128, True), (40, 96, False)])
def test_from_linear_matches_the_reference(n, k, bias):
    torch.manual_seed(0)
    lin = nn.Linear(k, n, bias=bias).to(torch.bfloat16)
    layer = MXFP4Linear.from_linear(lin)
    assert layer.layout is (mxfp4.Layout.AITER_SHUFFLED if n % 16 == 0 and k % 64 == 0 else mxfp4.Layout.PLAIN)
    x = torch.randn(3, 5, k, dtype=torch.bfloat16)
    want = mxfp4.reference.gemm_a4w4(x, mxfp4.quantize(lin.weight.detach()))
    if bias:
        want = want + lin.bias.detach()
    assert torch.equal(layer(x), want)


def test_state_dict_round_trip():
    lin = nn.Linear(64, 32).to(torch.bfloat16)
    a = MXFP4Linear.from_linear(lin)
    b = MXFP4Linear.from_linear(nn.Linear(64, 32).to(torch.bfloat16))
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 64, dtype=torch.bfloat16)
    assert torch.equal(a(x), b(x))


def test_bad_weight_is_rejected():
    with pytest.raises(TypeError, match="MXFP4Tensor"):
        MXFP4Linear(torch.zeros(4, 4))
