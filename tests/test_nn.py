"""MXFP4Linear on the CPU: construction errors, forward equals the reference, bytes kept."""
import pytest
import torch
from torch import nn

import mxfp4
from mxfp4 import reference
from mxfp4.nn import MXFP4Linear


def test_forward_matches_reference_and_keeps_only_mxfp4_bytes():
    lin = nn.Linear(128, 64, bias=True)
    layer = MXFP4Linear.from_linear(lin)
    x = torch.randn(5, 128).bfloat16()
    want = reference.gemm_a4w4(x, layer.weight) + layer.bias
    assert torch.equal(layer(x), want)
    assert layer.kept_bytes() == 64 * 64 + 256 * 8
    state = layer.state_dict()
    again = MXFP4Linear(layer.weight, layer.bias)
    again.load_state_dict(state)
    assert torch.equal(again(x), layer(x))


def test_from_linear_errors_name_the_layer():
    with pytest.raises(TypeError, match="linear must be a torch.nn.Linear"):
        MXFP4Linear.from_linear(None)
    with pytest.raises(ValueError, match=r"linear.in_features \(48\)"):
        MXFP4Linear.from_linear(nn.Linear(48, 16))
