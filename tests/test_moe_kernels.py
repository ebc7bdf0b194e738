"""The grouped kernels of a mixture of experts on a Hopper GPU (marker gpu): moe/grouped.py on the streaming GEMM
grouped, or the large-M kernels grouped (two launches, the offsets read on the device), against the exact oracle;
experts longer than their token tiles, the grouped large-M kernels against the dense ones expert by expert,
special values, graph capture with a new routing, a bias on the device, the prefill paths, and the experts
module under graph capture. The CPU side: test_moe.py."""
import pytest
import torch

import mxfp4
from mxfp4 import ExpertWeights, grouped_gemm_a4w4, plan, testing
from mxfp4.bench.data import heavy_tailed


@pytest.mark.gpu
@pytest.mark.parametrize("counts", [[7, 0, 1, 100], [333, 0, 0], [1, 1, 1, 1, 16, 32, 64]])
def test_grouped_gemm_on_the_kernels_meets_the_contract(counts):
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


def _experts_problem(counts, n, k, seed, dtype=torch.int32):
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


GROUPED_WGMMA = [plan.GROUPED_WGMMA, plan.GROUPED_WGMMA_TN128]
"""The grouped large-M kernels' token tiles."""

GROUPED_STREAM_16 = plan.GroupedStreamParams(plan.stream_params(2, 8, 2, 32, sign_split=True))
"""The grouped streaming GEMM on chunks of 16 rows (the heuristic's from 5 mean rows an expert)."""


@pytest.mark.gpu
@pytest.mark.parametrize("params", [GROUPED_STREAM_16, plan.GROUPED_WGMMA], ids=str)
@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("e, n, k", [(8, 512, 1024), (256, 512, 1024), (6, 1000, 544), (5, 40, 96)])
def test_grouped_kernel_meets_the_contract(e, n, k, offsets_dtype, params):
    """Each kernel (the grouped streaming GEMM, the grouped large-M kernels) on experts of 0..33 rows."""
    counts = _counts(e, seed=e)
    a, plain, stacked, offsets = _experts_problem(counts, n, k, seed=e + k, dtype=offsets_dtype)
    t = sum(counts)
    torch.full((t, -(-n // 16) * 16), float("nan"), dtype=torch.bfloat16, device="cuda")  # poison the next block
    out = grouped_gemm_a4w4(a, stacked, offsets, params=params)
    assert out.shape == (t, n) and out.dtype is torch.bfloat16
    report = _check_grouped(out, a, plain, counts)
    assert report.passed, report
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets, params=params))  # bitwise deterministic


@pytest.mark.gpu
@pytest.mark.parametrize("params", [None, plan.GROUPED_WGMMA], ids=["heuristic", "large-m"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_grouped_kernel_reads_fp16_and_float32_as_given(dtype, params):
    """fp16 and float32 rows (values beyond bf16's precision) quantized by the grouped launch itself: the
    reference's bits for every row."""
    counts = _counts(8, seed=5)
    a, plain, stacked, offsets = _experts_problem(counts, 512, 1024, seed=5)
    a = (a.float() * 3.7).to(dtype)
    out = grouped_gemm_a4w4(a, stacked, offsets, params=params)
    report = _check_grouped(out, a, plain, counts)
    assert report.passed and report.identical_fraction == 1.0, report


@pytest.mark.gpu
@pytest.mark.parametrize("mt", [1, 2, 4])
def test_grouped_kernel_loops_experts_larger_than_its_token_tile(mt):
    """Every chunk size against experts of 0..100 rows (a 33-row expert is 5 chunks at mt 1), on tiles of
    128 and 64 weight rows by 32 and 16 blocks (N = 1000: a short last tile; K = 2080: a short last unit;
    the stream-K split cuts tiles between CTAs), deterministic."""
    counts = [33, 0, 1, 100, 16, 0, 7, 64, 8, 9]
    a, plain, stacked, offsets = _experts_problem(counts, 1000, 2080, seed=mt)
    for g, kw, ks in ((8, 2, 32), (4, 4, 16)):
        if mt == 4 and g == 8:
            continue  # 32 rows on 128-row tiles: no ring fits
        params = plan.GroupedStreamParams(plan.stream_params(mt, g, kw, ks, sign_split=mt <= 2))
        out = grouped_gemm_a4w4(a, stacked, offsets, params=params)
        report = _check_grouped(out, a, plain, counts)
        assert report.passed, (params, report)
        assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets, params=params))


@pytest.mark.gpu
@pytest.mark.parametrize("params", [None] + GROUPED_WGMMA, ids=str)
def test_grouped_kernel_special_values_and_one_hot_expert(params):
    """NaN / Inf rows where the exact product has them; all rows on one expert of 256 (the rest empty)."""
    counts = [0] * 255 + [40]
    a, plain, stacked, offsets = _experts_problem(counts, 512, 1024, seed=3)
    a[3, 17] = float("inf")
    a[5, 900] = float("nan")
    a[7] = 0
    out = grouped_gemm_a4w4(a, stacked, offsets, params=params)
    report = _check_grouped(out, a, plain, counts)
    assert report.passed, report
    assert torch.isnan(out[3]).all() and torch.isnan(out[5]).all() and (out[7] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("params", [None, plan.GROUPED_WGMMA], ids=["heuristic", "large-m"])
@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
def test_grouped_kernel_under_graph_capture(offsets_dtype, params):
    """Captured once (no host read of the offsets), replayed with new rows and a new routing: the eager
    call's bits."""
    e, n, k = 256, 512, 1024
    counts = _counts(e, seed=1)
    t = sum(counts)
    a, plain, stacked, offsets = _experts_problem(counts, n, k, seed=5, dtype=offsets_dtype)
    static_a, static_off = a.clone(), offsets.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        grouped_gemm_a4w4(static_a, stacked, static_off, params=params)  # warm: compile, load, plan
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = grouped_gemm_a4w4(static_a, stacked, static_off, params=params)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        new_counts = torch.multinomial(torch.ones(e), t, replacement=True, generator=g).bincount(minlength=e).tolist()
        new_a = torch.randn(t, k, device="cuda", dtype=torch.bfloat16)
        static_a.copy_(new_a)
        static_off.copy_(torch.tensor(new_counts).cumsum(0).to(offsets_dtype))
        graph.replay()
        torch.cuda.synchronize()
        want = grouped_gemm_a4w4(new_a, stacked, static_off.clone(), params=params)
        assert torch.equal(out, want)
        assert _check_grouped(out, new_a, plain, new_counts).passed
    static_a.copy_(a)
    static_off.copy_(offsets)
    graph.replay()
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets, params=params))


def _check_biased(out, a, plain, counts, bias):
    """out against each row's exact product with its expert plus that expert's bias row, under the biased bound."""
    start = 0
    for e, (w, c) in enumerate(zip(plain, counts)):
        if c:
            x, mag = testing.exact_product(a[start:start + c], w)
            biased = x + bias[e].double()
            got = out[start:start + c].double()
            assert ((got - biased).abs() <= testing.biased_bound(biased, mag, w.shape[1])).all(), e
        start += c


@pytest.mark.gpu
@pytest.mark.parametrize("params", [None, GROUPED_STREAM_16] + GROUPED_WGMMA, ids=str)
def test_grouped_kernels_add_each_experts_bias_on_the_device(params):
    """A bias [E, N]: the kernel's float32 totals, each row's expert's bias row added on the device, rounded
    once; inside the biased bound, deterministic, and under graph capture (no host read) the eager bits."""
    counts = [7, 0, 1, 100, 0, 33, 64, 2]
    a, plain, stacked, offsets = _experts_problem(counts, 1000, 544, seed=11)
    bias = (torch.randn(len(counts), 1000, generator=torch.Generator().manual_seed(11)) * 30).bfloat16().cuda()
    out = grouped_gemm_a4w4(a, stacked, offsets, params=params, bias=bias)
    assert out.shape == (sum(counts), 1000) and out.dtype is torch.bfloat16
    _check_biased(out, a, plain, counts, bias)
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets, params=params, bias=bias))
    static_a = a.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        grouped_gemm_a4w4(static_a, stacked, offsets, params=params, bias=bias)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = grouped_gemm_a4w4(static_a, stacked, offsets, params=params, bias=bias)
    static_a.copy_(a.flip(0))
    graph.replay()
    assert torch.equal(captured, grouped_gemm_a4w4(a.flip(0), stacked, offsets, params=params, bias=bias))


@pytest.mark.gpu
@pytest.mark.parametrize("params", GROUPED_WGMMA, ids=str)
@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
def test_grouped_large_m_kernels_are_the_dense_kernels_expert_by_expert(params, offsets_dtype):
    """An expert's chunks of tn rows are the dense large-M kernels' token tiles of that expert's rows, so
    each expert's rows have the bits of gemm_a4w4 on them with the same tile (a row's result may depend
    on the other rows of its tile), inside the contract, deterministic: experts of 0, 1, tn - 1, tn,
    tn + 1 and 300 rows; N and K not multiples of the tiles (K = 544 padded to 576)."""
    tn = params.tile.tn
    counts = [300, 0, 1, tn - 1, tn, tn + 1, 0, 7]
    a, plain, stacked, offsets = _experts_problem(counts, 1000, 544, seed=tn, dtype=offsets_dtype)
    torch.full((sum(counts), 1008), float("nan"), dtype=torch.bfloat16, device="cuda")  # poison the next block
    out = grouped_gemm_a4w4(a, stacked, offsets, params=params)
    report = _check_grouped(out, a, plain, counts)
    assert report.passed, report
    start = 0
    for e, c in enumerate(counts):
        if c:
            want = mxfp4.gemm_a4w4(a[start:start + c], stacked.expert(e), params=params.tile)
            assert torch.equal(out[start:start + c], want), (e, c)
        start += c
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets, params=params))


@pytest.mark.gpu
def test_grouped_prefill_of_large_experts_takes_the_grouped_large_m_kernels():
    """Above plan.GROUPED_STREAM_MAX_ROWS of mean rows an expert: the grouped large-M kernels in one
    launch, each expert's rows the bits of gemm_a4w4 with their tile; heavy-tailed rows among them."""
    counts = [300, 0, 100]
    a, plain, stacked, offsets = _experts_problem(counts, 4096, 8192, seed=9)
    a[:100] = heavy_tailed(100, 1, 8192, seed=9)[0]
    assert plan.grouped_heuristic(sum(counts), 3, 4096, 8192) == plan.GROUPED_WGMMA_TN128
    out = grouped_gemm_a4w4(a, stacked, offsets)
    tile = plan.GROUPED_WGMMA_TN128.tile
    assert torch.equal(out[:300], mxfp4.gemm_a4w4(a[:300], stacked.expert(0), params=tile))
    assert torch.equal(out[300:], mxfp4.gemm_a4w4(a[300:], stacked.expert(2), params=tile))
    assert _check_grouped(out, a, plain, counts).passed


@pytest.mark.gpu
def test_grouped_prefill_of_small_experts_takes_the_grouped_large_m_kernels():
    """Prefill means (here 133 rows an expert, experts longer than a token tile) on small experts: the
    grouped large-M kernels too, inside the contract and deterministic."""
    counts = [300, 0, 100]
    a, plain, stacked, offsets = _experts_problem(counts, 512, 1024, seed=9)
    assert plan.grouped_heuristic(sum(counts), 3, 512, 1024) == plan.GROUPED_WGMMA_TN128
    out = grouped_gemm_a4w4(a, stacked, offsets)
    assert _check_grouped(out, a, plain, counts).passed
    assert torch.equal(out, grouped_gemm_a4w4(a, stacked, offsets))


@pytest.mark.gpu
def test_experts_module_under_graph_capture():
    """The bench's mixture-of-experts block (bf16 router, top-k, MXFP4Experts on the grouped kernel) captured
    once (no host read: under capture the range check is the device's assert) and replayed on new hidden states:
    the eager call's bits."""
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
