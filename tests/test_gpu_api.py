"""The library as users call it, on the kernels (marker gpu): any N and K % 32 (padded in prepare),
fp16 / float32 activations, autograd and torch.compile with grad, the launch path under graphs and
threads. Host time per eager call and the padded shapes' times are benchmarks (``mxfp4 bench
--host``, BENCHMARKS.md), not tests."""
import pytest
import torch

import mxfp4

from .cases import cuda_operands

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m", [1, 16, 256])
def test_graph_capture_of_the_driver_launch(m):
    a, plain = cuda_operands(m, 2112, 7168)
    w = mxfp4.prepare(plain)
    want = mxfp4.gemm_a4w4(a, w)
    static = a.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mxfp4.gemm_a4w4(static, w)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mxfp4.gemm_a4w4(static, w)
    for seed in range(3):
        new, _ = cuda_operands(m, 2112, 7168, seed=seed + 10)
        static.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, mxfp4.gemm_a4w4(new, w))
    static.copy_(a)
    graph.replay()
    assert torch.equal(out, want)

