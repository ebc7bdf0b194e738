"""The two-launch int8 path with its multiply launched as a programmatic dependent of the A fold
(``launch.INT8_PDL``): the multiply's programs may start before the fold's launch ends and wait
in the kernel for its end. Under the CPU interpreter the path has no dependent launch (the
interpreter's tests of the int8 path are in test_int8.py).

What would go wrong without the wait: the multiply would read a fold not yet written. The GPU
tests below check results (exact, equal to plain launches, back-to-back calls, a CUDA graph),
but on the H200 a variant launched as a dependent WITHOUT the wait also passed the back-to-back
check (fifteenth session, docs/results/s15/pdl-nowait-run1.txt: the tile order happens to read
what the fold wrote first). So the wait itself is checked in the compiled code, on the CPU:
:func:`test_pdl_wait_comes_before_every_read_and_the_fold_releases_after_its_stores`.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mxfp4
from mxfp4 import KernelConfig, Layout, launch, testing

from test_int8 import spread_rows

CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")

ROOT = Path(__file__).resolve().parents[1]


def test_pdl_wait_comes_before_every_read_and_the_fold_releases_after_its_stores():
    """sm_90 PTX (tests/pdl_ptx_probe.py, compiled in a process without TRITON_INTERPRET): the
    multiply with PDL waits (griddepcontrol.wait) before its first global load, TMA copy or
    atomic, and without PDL has no wait; the fold lets its dependent start at its start (PDL 1),
    after its last store (PDL 2), or not at all (0); with weight prefetchers (PF_PROGS) those let it
    start before they prefetch."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "pdl_ptx_probe.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["mul0"]["wait"] == [] and got["mul0"]["reads"]
    assert len(got["mul1"]["wait"]) == 1 and got["mul1"]["wait"][0] < min(got["mul1"]["reads"])
    assert got["fold0"]["trigger"] == []
    first_access = min(got["fold1"]["loads"] + got["fold1"]["stores"])
    assert len(got["fold1"]["trigger"]) == 1 and got["fold1"]["trigger"][0] < first_access
    assert len(got["fold2"]["trigger"]) == 1 and got["fold2"]["trigger"][0] > max(got["fold2"]["stores"])
    assert got["fold2"]["prefetch"] == []
    # with weight prefetchers in the grid: they trigger at their start and only prefetch; the fold
    # programs still trigger after their last store
    pf = got["fold2pf"]
    assert len(pf["trigger"]) == 2 and pf["prefetch"] and max(pf["trigger"]) > max(pf["stores"])
    assert min(pf["trigger"]) < min(pf["prefetch"])
    # the tensor-map prefetch (TMAP_PF) names the PTX parameters of a_desc and w_desc (the first two
    # arguments, each one 128-byte tensor map and its shape and strides: parameters 0 and 5), and comes
    # first: before the multiply's wait and before either kernel's first global access
    for key, kernel in (("mul_tmap", "a4w4_int8_kernel"), ("meet_tmap", "a4w4_meet_kernel")):
        tm = got[key]
        assert tm["named"] == [f"{kernel}_param_0", f"{kernel}_param_5"]
        assert tm["params128"][:2] == tm["named"]
        assert len(tm["prefetch"]) == 1 and tm["prefetch"][0] < min(tm["reads"] + tm["wait"])
    assert len(got["mul_tmap"]["wait"]) == 1 and got["mul_tmap"]["wait"][0] < min(got["mul_tmap"]["reads"])


def test_no_dependent_launch_off_the_gpu():
    from mxfp4 import residency

    assert not residency.programmatic_launch(torch.device("cpu"))


def test_weight_prefetch_bytes(monkeypatch):
    """The A fold's weight prefetchers ask for half a segment at most (K = 512: 256 bytes a row), 512
    bytes a row, 4 MiB in all (N = 24576: 160 bytes a row), nothing on split-K segments."""
    monkeypatch.setattr(launch, "INT8_W_PF_PROGS", 64)
    assert launch.w_prefetch_bytes(2880, 16, 1) == 256
    assert launch.w_prefetch_bytes(3072, 48, 1) == 512
    assert launch.w_prefetch_bytes(7168, 64, 1) == 512
    assert launch.w_prefetch_bytes(24576, 48, 1) == 160
    assert launch.w_prefetch_bytes(2112, 56, 4) == 0
    monkeypatch.setattr(launch, "INT8_W_PF_SPLIT", 1)  # the 4 MiB count every segment: 4 MiB / (2112 * 4)
    assert launch.w_prefetch_bytes(2112, 56, 4) == 496
    monkeypatch.setattr(launch, "INT8_W_PF_PROGS", 0)
    assert launch.w_prefetch_bytes(3072, 48, 1) == 0


def test_weight_prefetch_delay():
    """The prefetchers wait 500 ns where K >= 1536 and N <= 8192, else not at all."""
    assert launch.w_prefetch_delay(2880, 2880) == 500
    assert launch.w_prefetch_delay(3072, 1536) == 500
    assert launch.w_prefetch_delay(7168, 2048) == 500
    assert launch.w_prefetch_delay(2880, 512) == 0
    assert launch.w_prefetch_delay(4096, 1024) == 0
    assert launch.w_prefetch_delay(24576, 1536) == 0


CASES = [(256, 3072, 1536, KernelConfig(64, 64, 1, 4, 3, 8, "int8")),
         (100, 2112, 7168, KernelConfig(64, 128, 3, 4, 3, 4, "int8")),  # split-K: 3 segments
         (333, 2880, 2880, KernelConfig(128, 128, 1, 8, 3, 8, "int8"))]


def _operands(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    a[::7] = spread_rows(a[::7], -9, 9, seed)  # segments that do not fold: the block-by-block path
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()).to_layout(Layout.AITER_SHUFFLED)
    return a, w


def _call(a, w, cfg):
    out = torch.full((a.shape[0], w.shape[0]), float("nan"), dtype=torch.bfloat16, device="cuda")
    launch.launch_a4w4(a, w, out, cfg)
    return out


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [1, 2])
@pytest.mark.parametrize("m, n, k, cfg", CASES)
def test_pdl_int8_exact_and_equal_to_plain_launches(m, n, k, cfg, pdl, monkeypatch):
    a, w = _operands(m, n, k, m + k)
    monkeypatch.setattr(launch, "INT8_PDL", pdl)
    got = _call(a, w, cfg)
    assert testing.check_gemm(got, a, w).passed
    monkeypatch.setattr(launch, "INT8_PDL", 0)
    assert torch.equal(got.view(torch.int16), _call(a, w, cfg).view(torch.int16))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [1, 2])
@pytest.mark.parametrize("m, n, k, cfg", CASES)
def test_pdl_int8_back_to_back_calls(m, n, k, cfg, pdl, monkeypatch):
    """Eight calls on eight different A, queued with no synchronization (each call's fold arrays
    are freed when it returns, so the next fold may take their memory), each bitwise equal to
    the same call made alone with plain launches. (Not a proof of the wait: see the module.)"""
    _, w = _operands(m, n, k, 7)
    inputs = [_operands(m, n, k, 100 + i)[0] for i in range(8)]
    monkeypatch.setattr(launch, "INT8_PDL", 0)
    want = []
    for a in inputs:
        want.append(_call(a, w, cfg))
        torch.cuda.synchronize()
    monkeypatch.setattr(launch, "INT8_PDL", pdl)
    torch.cuda.synchronize()
    got = [_call(a, w, cfg) for a in inputs]
    torch.cuda.synchronize()
    for i, (g_out, w_out) in enumerate(zip(got, want)):
        assert torch.equal(g_out.view(torch.int16), w_out.view(torch.int16)), f"call {i}"


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [1, 2])
def test_pdl_int8_in_a_cuda_graph(pdl, monkeypatch):
    """Captured in a CUDA graph (the dependent launch becomes a programmatic edge) and replayed
    on new A written into the captured input: the same bits as eager calls."""
    m, n, k, cfg = CASES[0]
    monkeypatch.setattr(launch, "INT8_PDL", pdl)
    a, w = _operands(m, n, k, 11)
    x = a.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            _call(x, w, cfg)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = _call(x, w, cfg)
    for seed in (12, 13, 14):
        b, _ = _operands(m, n, k, seed)
        x.copy_(b)
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y.view(torch.int16), _call(b, w, cfg).view(torch.int16)), seed
