"""The library as users call it, on the kernels (marker gpu): any N and K % 32 (padded in prepare),
fp16 / float32 activations, autograd and torch.compile with grad, the launch path under graphs and
threads. Host time per eager call and the padded shapes' times are benchmarks (``mxfp4 bench
--host``, BENCHMARKS.md), not tests."""
import pytest
import torch

import mxfp4
from mxfp4 import plan, testing
from mxfp4.nn import MXFP4Linear

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


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("m", [1, 16, 100, 333])
def test_row_parallel_on_the_kernels_within_the_bound_of_the_one_process_layer(world, m):
    """What each rank of a row-parallel layer computes, all ranks in this process: the kernels' float32
    partials of the K-shards added in rank order and rounded once (world 1: the layer itself)."""
    from mxfp4 import distributed as tp, ops

    n, k = 2112, 2880
    a, plain = cuda_operands(m, n, k, seed=world * 1000 + m)
    layer = MXFP4Linear.from_mxfp4(plain)
    one = layer(a)
    if world == 1:
        row = tp.RowParallelMXFP4Linear.from_layer(layer, rank=0, world_size=1)
        assert torch.equal(row(a), one)
        return
    parts = [ops.gemm_a4w4_partial(tp.shard_input(a, r, world), tp.shard_rows(plain, r, world)) for r in range(world)]
    y = tp.sum_in_rank_order(parts).to(torch.bfloat16)
    report = testing.check_gemm(y, a, plain)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert (y == one).double().mean().item() >= 0.999
    again = [ops.gemm_a4w4_partial(tp.shard_input(a, r, world), tp.shard_rows(plain, r, world)) for r in range(world)]
    assert torch.equal(tp.sum_in_rank_order(again).to(torch.bfloat16), y)


@pytest.mark.parametrize("counts", [[7, 0, 1, 100], [333, 0, 0], [1, 1, 1, 1, 16, 32, 64]])
def test_grouped_gemm_on_the_kernels_meets_the_contract(counts):
    from mxfp4.moe import ExpertWeights, grouped_gemm_a4w4
    g = torch.Generator().manual_seed(len(counts))
    ws = [mxfp4.quantize(torch.randn(2880, 512, generator=g).bfloat16()) for _ in counts]
    stacked = ExpertWeights.stack([mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout) for w in ws])
    a = torch.randn(sum(counts), 512, generator=g).bfloat16().cuda()
    offsets = torch.tensor(counts).cumsum(0).to(torch.int32).cuda()
    out = grouped_gemm_a4w4(a, stacked, offsets)
    start = 0
    for w, c in zip(ws, counts):
        if c:
            report = testing.check_gemm(out[start:start + c].cpu(), a[start:start + c].cpu(), w)
            assert report.passed, report
        start += c
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets))


# ---- the grouped kernel (mixture of experts): two launches, the offsets read on the device ---------

def _experts_problem(counts, n, k, seed, dtype=torch.int32):
    from mxfp4.moe import ExpertWeights
    g = torch.Generator(device="cuda").manual_seed(seed)
    plain = [mxfp4.quantize(torch.randn(n, k, generator=g, device="cuda", dtype=torch.bfloat16)) for _ in counts]
    a = torch.randn(sum(counts), k, generator=g, device="cuda", dtype=torch.bfloat16)
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(dtype)
    return a, plain, ExpertWeights.stack(plain), offsets


def _check_grouped(out, a, plain, counts):
    """out against each row's exact product with its expert, under the kernels' contract (one report)."""
    exact, mag, start = [], [], 0
    for w, c in zip(plain, counts):
        if c:
            x, m = testing.exact_product(a[start:start + c], w)
            exact.append(x)
            mag.append(m)
        start += c
    return testing.compare_with_exact(out, torch.cat(exact), torch.cat(mag), plain[0].shape[1])


def _counts(e, seed, special=(0, 1, 7, 16, 33)):
    """E experts' row counts: the special counts first, then a seeded mix of 0..9 rows."""
    g = torch.Generator().manual_seed(seed)
    rest = torch.randint(0, 10, (e - len(special),), generator=g).tolist() if e > len(special) else []
    return (list(special) + rest)[:e]


@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("e, n, k", [(8, 512, 1024), (256, 512, 1024), (6, 1000, 544), (5, 40, 96)])
def test_grouped_kernel_meets_the_contract(e, n, k, offsets_dtype):
    from mxfp4.moe import grouped_gemm_a4w4
    counts = _counts(e, seed=e)
    a, plain, stacked, offsets = _experts_problem(counts, n, k, seed=e + k, dtype=offsets_dtype)
    t = sum(counts)
    params = plan.grouped_heuristic(t, e, -(-n // 16) * 16, -(-k // 64) * 64)
    assert params is not None  # decode sizes: the single launch, not the per-expert loop
    torch.full((t, -(-n // 16) * 16), float("nan"), dtype=torch.bfloat16, device="cuda")  # poison the next block
    out = grouped_gemm_a4w4(a, stacked, offsets)
    assert out.shape == (t, n) and out.dtype is torch.bfloat16
    report = _check_grouped(out, a, plain, counts)
    assert report.passed, report
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets))  # bitwise deterministic


@pytest.mark.parametrize("mt", [1, 2, 4, 8])
def test_grouped_kernel_loops_experts_larger_than_its_token_tile(mt):
    """Every token tile against experts of 0..100 rows (a 33-row expert is 5 chunks at mt 1), one split
    across a cluster; and the same bits as the heuristic's variant where it takes the same tile."""
    from mxfp4.moe import grouped_gemm_a4w4
    counts = [33, 0, 1, 100, 16, 0, 7, 64, 8, 9]
    a, plain, stacked, offsets = _experts_problem(counts, 256, 2048, seed=mt)
    for split in (1, 3):
        params = plan.GroupedParams(plan.DecodeParams(mt, 2, 4, 8, split))
        out = grouped_gemm_a4w4(a, stacked, offsets, params=params)
        report = _check_grouped(out, a, plain, counts)
        assert report.passed, (params, report)


def test_grouped_kernel_special_values_and_one_hot_expert():
    """NaN / Inf rows where the exact product has them; all rows on one expert of 256 (the rest empty)."""
    from mxfp4.moe import grouped_gemm_a4w4
    counts = [0] * 255 + [40]
    a, plain, stacked, offsets = _experts_problem(counts, 512, 1024, seed=3)
    a[3, 17] = float("inf")
    a[5, 900] = float("nan")
    a[7] = 0
    out = grouped_gemm_a4w4(a, stacked, offsets)
    report = _check_grouped(out, a, plain, counts)
    assert report.passed, report
    assert torch.isnan(out[3]).all() and torch.isnan(out[5]).all() and (out[7] == 0).all()


@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
def test_grouped_kernel_under_graph_capture(offsets_dtype):
    """Captured once (no host read of the offsets), replayed with new rows and a new routing: the eager
    call's bits."""
    from mxfp4.moe import grouped_gemm_a4w4
    e, n, k = 256, 512, 1024
    counts = _counts(e, seed=1)
    t = sum(counts)
    a, plain, stacked, offsets = _experts_problem(counts, n, k, seed=5, dtype=offsets_dtype)
    static_a, static_off = a.clone(), offsets.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        grouped_gemm_a4w4(static_a, stacked, static_off)  # warm: compile, load, plan
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = grouped_gemm_a4w4(static_a, stacked, static_off)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        new_counts = torch.multinomial(torch.ones(e), t, replacement=True, generator=g).bincount(minlength=e).tolist()
        new_a = torch.randn(t, k, device="cuda", dtype=torch.bfloat16)
        static_a.copy_(new_a)
        static_off.copy_(torch.tensor(new_counts).cumsum(0).to(offsets_dtype))
        graph.replay()
        torch.cuda.synchronize()
        want = grouped_gemm_a4w4(new_a, stacked, static_off.clone())
        assert torch.equal(out, want)
        assert _check_grouped(out, new_a, plain, new_counts).passed
    static_a.copy_(a)
    static_off.copy_(offsets)
    graph.replay()
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets))


def test_grouped_prefill_of_large_experts_takes_the_per_expert_kernels():
    """Above plan.GROUPED_MAX_EXPERT_MACS of mean work an expert: each expert's gemm_a4w4, the same bits."""
    from mxfp4.moe import grouped_gemm_a4w4
    counts = [300, 0, 100]
    a, plain, stacked, offsets = _experts_problem(counts, 4096, 8192, seed=9)
    assert plan.grouped_heuristic(sum(counts), 3, 4096, 8192) is None
    out = grouped_gemm_a4w4(a, stacked, offsets)
    assert torch.equal(out[:300], mxfp4.gemm_a4w4(a[:300], stacked.expert(0)))
    assert torch.equal(out[300:], mxfp4.gemm_a4w4(a[300:], stacked.expert(2)))
    assert _check_grouped(out, a, plain, counts).passed


def test_grouped_prefill_of_small_experts_takes_the_grouped_kernel():
    """Prefill means (here 133 rows an expert, some experts longer than a chunk of 32 rows) on small
    experts: the grouped kernel, inside the contract and deterministic."""
    from mxfp4.moe import grouped_gemm_a4w4
    counts = [300, 0, 100]
    a, plain, stacked, offsets = _experts_problem(counts, 512, 1024, seed=9)
    params = plan.grouped_heuristic(sum(counts), 3, 512, 1024)
    assert params is not None and params.tile.tokens == 32
    out = grouped_gemm_a4w4(a, stacked, offsets)
    assert _check_grouped(out, a, plain, counts).passed
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets))


def test_experts_module_under_graph_capture():
    """The bench's mixture-of-experts block (bf16 router, top-k, MXFP4Experts on the grouped kernel) captured
    once (no host read: the range check is left out under capture) and replayed on new hidden states: the
    eager call's bits."""
    from mxfp4.bench import llama, model
    s = llama.LlamaShape(vocab=256, hidden=256, intermediate=0, layers=1, heads=4, kv_heads=2, max_seq=64,
                         experts=16, top_k=4, expert_intermediate=128)
    moe = llama.MoE(s).cuda()
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_(0.0, 0.05)
    moe = moe.to(torch.bfloat16).requires_grad_(False)
    mxfp4.quantize_(moe, model._quantized)
    static = torch.randn(1, 3, 256, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        moe(static)  # warm: compile, load, plan
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = moe(static)
    for seed in range(3):
        x = torch.randn(1, 3, 256, device="cuda", dtype=torch.bfloat16, generator=torch.Generator("cuda").manual_seed(seed))
        static.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, moe(x))
