"""The CUDA kernels on a Hopper GPU (marker gpu): exactness against the exact oracle, specials,
determinism, the large-M kernel on data that takes each of its paths and at prefill sizes, no memory
kept between calls, the prepared-weight module, graphs, compile, streams, 8 host threads and 4
streams against serial calls, and a fuzzer run on the kernels."""
import pytest
import torch

import mxfp4
from mxfp4 import formats, task, testing
from mxfp4.nn import MXFP4Linear
from mxfp4.tensor import Layout, MXFP4Tensor

pytestmark = pytest.mark.gpu


def test_quantize_kernel_every_bf16_pattern():
    x = torch.arange(0, 65536, dtype=torch.int32, device="cuda").to(torch.int16).view(torch.bfloat16).reshape(-1, 64)
    q = mxfp4.quantize(x)
    codes, scales = formats.quantize_codes(x)
    assert torch.equal(q.data, formats.pack_codes(codes)) and torch.equal(q.scales, scales)


@pytest.mark.parametrize("m, n, k, seed", task.TEST_SHAPES + task.BENCHMARK_SHAPES)
def test_task_shapes_exact_and_deterministic(m, n, k, seed):
    data = task.generate_input(m, n, k, seed, "cuda")
    out = task.custom_kernel(data)
    w = MXFP4Tensor(data[3], data[4], (n, k), Layout.AITER_SHUFFLED)
    report = testing.check_gemm(out, data[0], w)
    assert report.passed, report
    assert all(torch.equal(out, task.custom_kernel(data)) for _ in range(100))


@pytest.mark.parametrize("m, n, k", [(16, 2112, 7168), (256, 3072, 1536), (4096, 7168, 7168)])
def test_nothing_kept_between_calls(m, n, k):
    data = task.generate_input(m, n, k, 1, "cuda")
    layer = MXFP4Linear.from_mxfp4(MXFP4Tensor(data[3], data[4], (n, k), Layout.AITER_SHUFFLED))
    outs = [task.custom_kernel(data), layer(data[0])]
    torch.cuda.synchronize()
    for fn in (lambda: task.custom_kernel(data), lambda: layer(data[0])):
        for _ in range(3):
            before = torch.cuda.memory_allocated()
            outs.append(fn())
            torch.cuda.synchronize()
            assert torch.cuda.memory_allocated() - before == m * n * 2  # the output alone
    assert layer.kept_bytes() == data[3].numel() + data[4].numel()


@pytest.mark.parametrize("m", [32, 256])  # the mma.sync kernel, the large-M kernel (two launches, a tensor map)
def test_prepared_module_graph_and_compile(m):
    data = task.generate_input(m, 3072, 1536, 45, "cuda")
    layer = MXFP4Linear.from_mxfp4(MXFP4Tensor(data[3], data[4], (3072, 1536), Layout.AITER_SHUFFLED))
    a = data[0]
    want = task.custom_kernel(data)
    assert torch.equal(layer(a), want)
    assert torch.equal(torch.compile(layer, fullgraph=True)(a), want)
    static = a.clone()
    layer(static)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = layer(static)
    static.copy_(a)
    g.replay()
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
    from mxfp4.cuda import runtime

    for name in ("_kernels", "_streams", "_gemm"):
        cache = getattr(runtime, name, None)
        if isinstance(cache, dict):
            cache.clear()


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


def test_fuzz_on_the_kernels():
    import io

    from mxfp4 import fuzz

    text = io.StringIO()
    rc = fuzz.fuzz(3000, 31, "cuda", jobs=1, out=text)
    print(text.getvalue())
    assert rc == 0, text.getvalue()
    text = io.StringIO()
    rc = fuzz.fuzz(1000, 32, "cuda", jobs=1, out=text, large_m=True)
    print(text.getvalue())
    assert rc == 0 and "1000 cases drawn for the large-M kernel (0 that" in text.getvalue(), text.getvalue()
