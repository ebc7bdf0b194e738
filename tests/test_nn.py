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


def test_registered_op_traces_under_torch_compile():
    """torch.compile (fullgraph) goes through torch.ops.mxfp4.gemm_a4w4 via its fake impl."""
    torch._dynamo.reset()
    layer = MXFP4Linear.from_linear(nn.Linear(128, 48, bias=False).to(torch.bfloat16))
    x = torch.randn(5, 128, dtype=torch.bfloat16)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x), layer(x))
    assert hasattr(torch.ops.mxfp4, "gemm_a4w4")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_capture_and_replay():
    layer = MXFP4Linear.from_linear(nn.Linear(1536, 3072, bias=False).to(torch.bfloat16)).cuda()
    x = torch.randn(16, 1536, dtype=torch.bfloat16, device="cuda")
    want = layer(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            layer(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = layer(x)
    for _ in range(3):
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, want)
