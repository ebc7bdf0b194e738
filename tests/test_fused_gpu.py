"""The one-launch int8 kernel (int8_fused) on the GPU at the task's sizes: every K of the task, odd
M, N not a multiple of 64, rows that do not fold, and its split-K sum (one program, or the last
few of a tile sharing it). CPU coverage of the same kernel is in test_int8.py."""
import pytest
import torch

import mxfp4
from mxfp4 import KernelConfig, Layout, fold, launch, ops, testing

from test_int8 import spread_rows

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m", [1, 7, 16, 100, 333])
@pytest.mark.parametrize("n, k", [(2880, 512), (2112, 7168), (3072, 1536), (2152, 2048)])
def test_fused_on_gpu(m, n, k):
    """The one-launch kernel on GPU: odd M, N not a multiple of 64 (2152), every K of the task;
    every 7th row spread (those tiles go block by block); A's fold bit for bit."""
    g = torch.Generator().manual_seed(m + n + k)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    a[::7] = spread_rows(a[::7], -9, 9, 8)
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda())
    w = w.to_layout(Layout.AITER_SHUFFLED if n % 16 == 0 else Layout.PLAIN)
    for cfg in (KernelConfig(16, 64, 1, 4, 3, 8, "int8_fused"), KernelConfig(16, 128, 4, 8, 3, 4, "int8_fused"),
                KernelConfig(64, 128, 2, 4, 3, 4, "int8_fused"), KernelConfig(32, 32, 1, 8, 1, 16, "int8_fused"),
                KernelConfig(16, 128, 12, 8, 3, 4, "int8_fused", packed=True),
                KernelConfig(16, 32, 1, 4, 1, 16, "int8_fused", packed=True),
                KernelConfig(8, 64, 1, 8, 1, 16, "int8_fused"), KernelConfig(4, 128, 4, 8, 3, 4, "int8_fused"),
                KernelConfig(16, 128, 4, 4, 3, 8, "int8_fused", w_tma=True),
                KernelConfig(8, 128, 1, 4, 2, 16, "int8_fused", w_tma=True)):
        out, folded_a = ops.gemm_a4w4_debug(a, w, cfg)
        assert not fold.differing_arrays(folded_a, fold.fold_tensor(mxfp4.quantize(a), folded_a.seg_blocks)), cfg
        assert testing.check_gemm(out, a, w).passed, cfg


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m, n, k, cfg, reducers", [
    (16, 2112, 7168, KernelConfig(16, 128, 14, 8, 3, 4, "int8_fused"), 4),   # 17 tiles, 14 splits
    (7, 2152, 2048, KernelConfig(8, 64, 4, 4, 2, 16, "int8_fused"), 2),      # 34 tiles of 7 rows, N % 64 != 0
    (1, 3072, 1536, KernelConfig(16, 128, 3, 4, 1, 16, "int8_fused"), 1),    # partials of the one real row
])
def test_fused_shared_split_sum_on_gpu(m, n, k, cfg, reducers, monkeypatch):
    """Where the last programs of a split-K tile share its sum (launch._split_reducers), every
    element is the same sum in the same order as when one program does it all: the output is
    bitwise that of one reducer, on every call, and exact. (Shared here whatever the partials'
    bytes, so that the small tiles take that path too.)"""
    monkeypatch.setattr(launch, "FUSED_REDUCE_BYTES", 0)
    g = torch.Generator().manual_seed(m * n + k)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    a[::5] = spread_rows(a[::5], -9, 9, 3)  # some tiles go block by block
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda())
    chosen = []
    pick = launch._split_reducers
    monkeypatch.setattr(launch, "_split_reducers", lambda *args: chosen.append(pick(*args)) or chosen[-1])

    def call():
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        launch.launch_a4w4(a, w, out, cfg)
        return out

    shared = [call() for _ in range(20)]
    assert chosen[-1] == reducers, chosen
    monkeypatch.setattr(launch, "FUSED_REDUCERS", 1)
    alone = call()
    assert chosen[-1] == 1
    for out in shared:
        assert torch.equal(out.view(torch.int16), alone.view(torch.int16))
    assert testing.check_gemm(alone, a, w).passed
