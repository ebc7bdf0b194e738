"""The launch path beyond one eager call, on a Hopper GPU (marker gpu): CUDA graph capture and replays
with new inputs, calls on several CUDA streams and into out=, 8 host threads (the runtime's caches
cleared, so their first calls race to load the kernels) and 4 streams against serial calls."""
import pytest
import torch

import mxfp4
from mxfp4 import task
from mxfp4.nn import MXFP4Linear
from mxfp4.tensor import Layout, MXFP4Tensor

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


def test_streams_and_out():
    datas = [task.generate_input(16, 2112, 7168, s, "cuda") for s in range(4)]
    serial = [task.custom_kernel(d) for d in datas]
    streams = [torch.cuda.Stream() for _ in datas]
    outs = [None] * 4
    torch.cuda.synchronize()
    for i, (d, s) in enumerate(zip(datas, streams)):
        with torch.cuda.stream(s):
            outs[i] = task.custom_kernel(d)
    torch.cuda.synchronize()
    assert all(torch.equal(o, r) for o, r in zip(outs, serial))
    w = MXFP4Tensor(datas[0][3], datas[0][4], (2112, 7168), Layout.AITER_SHUFFLED)
    out = torch.empty(16, 2112, dtype=torch.bfloat16, device="cuda")
    assert mxfp4.gemm_a4w4(datas[0][0], w, out) is out and torch.equal(out, serial[0])


# ---- concurrency: host threads and CUDA streams against serial calls ------------------------------

CONCURRENT_SHAPES = ((16, 2112, 7168), (1, 256, 512), (333, 96, 640), (64, 3072, 1536), (7, 48, 192),
                     (256, 2880, 512), (4, 2880, 512), (100, 512, 1024))


def _concurrent_work(shared):
    """Eight jobs (a, w, calls): 0-3 on one shared weight (the task's first shape), 4-7 each on its
    own weight and shape; calls is a fixed list through every entry point (inputs made beforehand)."""
    jobs = []
    for j in range(8):
        if j < 4:
            m, n, k, w = 16 + 16 * j, shared.shape[0], shared.shape[1], shared
        else:
            m, n, k = CONCURRENT_SHAPES[j]
            g = torch.Generator(device="cuda").manual_seed(100 + j)
            w = mxfp4.prepare(mxfp4.quantize(torch.randn(n, k, generator=g, device="cuda", dtype=torch.bfloat16)))
        g = torch.Generator(device="cuda").manual_seed(j)
        a = torch.randn(3, m, k, generator=g, device="cuda", dtype=torch.bfloat16)
        layer = MXFP4Linear.from_mxfp4(w)
        calls = [lambda a=a, w=w: mxfp4.gemm_a4w4(a[0], w),
                 lambda a=a, layer=layer: layer(a[1]),
                 lambda a=a, w=w: torch.ops.mxfp4.gemm_a4w4(a[2], w.data, w.scales, *w.shape, True, False),
                 lambda a=a, w=w: task.custom_kernel((a[0], None, None, w.data, w.scales)),
                 lambda a=a: mxfp4.quantize(a[1]).data,
                 lambda a=a: mxfp4.quantize(a[2]).scales]
        jobs.append((a, w, calls))
    return jobs


def _clear_runtime_caches():
    """Forget the loaded kernels and cached launch objects, so the first calls race to load them."""
    from mxfp4 import ops
    from mxfp4.cuda import ops as cuda_ops, runtime

    runtime._kernels.clear()
    cuda_ops._launches.clear()
    ops._launches.clear()


@pytest.mark.parametrize("own_streams", [False, True], ids=["default_stream", "stream_per_thread"])
def test_eight_host_threads_match_serial_calls(own_streams):
    import threading

    data = task.generate_input(16, 2112, 7168, 15, "cuda")
    shared = MXFP4Tensor(data[3], data[4], (2112, 7168), Layout.AITER_SHUFFLED)
    jobs = _concurrent_work(shared)
    serial = [[call() for call in calls] for _, _, calls in jobs]
    torch.cuda.synchronize()
    _clear_runtime_caches()
    rounds = 5
    results = [None] * 8
    errors = []
    barrier = threading.Barrier(8, timeout=300)  # a thread failing early breaks it for the others

    def worker(j):
        try:
            stream = torch.cuda.Stream() if own_streams else torch.cuda.current_stream()
            stream.wait_stream(torch.cuda.default_stream())  # the inputs were made on the default stream
            with torch.cuda.stream(stream):
                barrier.wait()
                outs = [[call() for call in jobs[j][2]] for _ in range(rounds)]
            stream.synchronize()
            results[j] = outs
        except BaseException as e:  # re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(j,)) for j in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    torch.cuda.synchronize()
    for j in range(8):
        for r in range(rounds):
            for i, (got, want) in enumerate(zip(results[j][r], serial[j])):
                assert torch.equal(got, want), f"thread {j}, round {r}, call {i}"


def test_four_streams_match_serial_calls():
    data = task.generate_input(16, 2112, 7168, 15, "cuda")
    shared = MXFP4Tensor(data[3], data[4], (2112, 7168), Layout.AITER_SHUFFLED)
    jobs = _concurrent_work(shared)
    serial = [[call() for call in calls] for _, _, calls in jobs]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(4)]
    for s in streams:
        s.wait_stream(torch.cuda.default_stream())
    outs = [[] for _ in range(8)]
    for r in range(5):  # interleave: each stream gets two jobs, launched round-robin without syncs
        for j, (_, _, calls) in enumerate(jobs):
            with torch.cuda.stream(streams[j % 4]):
                outs[j].append([call() for call in calls])
    # into out= on the streams as well: one preallocated, poisoned output per job
    poisoned = []
    for j, (a, w, _) in enumerate(jobs):
        with torch.cuda.stream(streams[j % 4]):
            out = torch.full((a.shape[1], w.shape[0]), float("nan"), dtype=torch.bfloat16, device="cuda")
            poisoned.append(mxfp4.gemm_a4w4(a[0], w, out))
    for s in streams:
        s.synchronize()
    for j in range(8):
        for r in range(5):
            for i, (got, want) in enumerate(zip(outs[j][r], serial[j])):
                assert torch.equal(got, want), f"job {j}, round {r}, call {i}"
        assert torch.equal(poisoned[j], serial[j][0]), f"job {j}, out="
