"""Tensor-parallel MXFP4 layers against the one-process layer, gloo in 2 and 4 processes.

Column-parallel: bit-identical (CPU reference). Row-parallel: the same bits on every rank and from
call to call, the rank-order sum of float32 partials that this process computes alike, within the
kernels' bound of the exact one-process product, and bit-identical to the one-process layer on
nearly every output. The worker processes build the same weights and inputs from seeds, run the
sharded layers and save every rank's outputs; the comparisons run here.
On a Hopper GPU (marker gpu): the kernels' row-parallel partials, every rank in this process.
"""
import pathlib

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mxfp4
from mxfp4 import distributed as tp, formats, ops, testing
from mxfp4.nn import MXFP4Linear
from mxfp4.tensor import MXFP4Tensor

from .cases import cuda_operands

SHAPES = ((256, 256, False), (512, 512, True), (256, 1536, False), (336, 352, True), (1000, 480, False))
"""(N, K, bias): even shards, then uneven ones: N = 336 is 10.5 units of 32 rows and K = 352 is 11
blocks (shards of K % 64 == 32, which prepare pads); N = 1000 is not a multiple of 16."""

MS = (1, 7, 16, 100)
MLP = (256, 736)  # hidden, intermediate: 23 blocks, split 11 + 12 and 5 + 6 + 6 + 6
MLP_MS = (1, 16, 100)


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=gen).bfloat16()


def _layers() -> dict:
    """The full (unsharded) weights, biases and inputs, the same in every process."""
    gen = torch.Generator().manual_seed(31)
    cases = {}
    for n, k, with_bias in SHAPES:
        w = mxfp4.quantize(_randn(gen, n, k))
        bias = _randn(gen, n) if with_bias else None
        cases[(n, k)] = (w, bias, {m: _randn(gen, m, k) for m in MS})
    hidden, inter = MLP
    mlp = {name: mxfp4.quantize(_randn(gen, *shape) * 0.05)
           for name, shape in (("gate", (inter, hidden)), ("up", (inter, hidden)), ("down", (hidden, inter)))}
    mlp["down_bias"] = _randn(gen, hidden)
    mlp["x"] = {m: _randn(gen, m, hidden) for m in MLP_MS}
    return {"cases": cases, "mlp": mlp, "x3d": _randn(gen, 2, 3, SHAPES[0][1])}


def _mlp(x, gate, up, down):
    g, u = gate(x).float(), up(x).float()
    return down((torch.nn.functional.silu(g) * u).bfloat16())


def _worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)  # 4 ranks on a 2-core CI machine: oversubscribed threads cost 3-5x
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        data, out = _layers(), {}
        for (n, k), (w, bias, xs) in data["cases"].items():
            col = tp.ColumnParallelMXFP4Linear.from_mxfp4(w, bias, gather_output=True)
            row = tp.RowParallelMXFP4Linear.from_mxfp4(w, bias)
            for m, x in xs.items():
                out[("column", n, k, m)] = col(x)
                x_shard = tp.shard_input(x, rank, world)
                out[("row", n, k, m)] = row(x_shard)
                out[("row again", n, k, m)] = row(x_shard)
                # the naive way: each rank's partial rounded to bf16, then a bf16 all-reduce
                naive = mxfp4.gemm_a4w4(x_shard, row.weight)
                dist.all_reduce(naive)
                out[("naive", n, k, m)] = naive
        w, bias, _ = data["cases"][(SHAPES[0][0], SHAPES[0][1])]
        out["x3d column"] = tp.ColumnParallelMXFP4Linear.from_mxfp4(w, bias, gather_output=True)(data["x3d"])
        out["x3d row"] = tp.RowParallelMXFP4Linear.from_mxfp4(w, bias, input_is_parallel=False)(data["x3d"])
        p = data["mlp"]
        gate = tp.ColumnParallelMXFP4Linear.from_mxfp4(p["gate"])
        up = tp.ColumnParallelMXFP4Linear.from_mxfp4(p["up"])
        down = tp.RowParallelMXFP4Linear.from_mxfp4(p["down"], p["down_bias"])
        for m, x in p["x"].items():
            out[("mlp", m)] = _mlp(x, gate, up, down)
        torch.save(out, pathlib.Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module", params=(2, 4), ids=lambda w: f"world{w}")
def run(request, tmp_path_factory):
    """Every rank's outputs of one gloo run with ``world`` processes, and the single-process layers' inputs."""
    world = request.param
    tmp = tmp_path_factory.mktemp(f"tp{world}")
    mp.spawn(_worker, args=(world, str(tmp / "init"), str(tmp)), nprocs=world, join=True)
    ranks = [torch.load(tmp / f"rank{r}.pt") for r in range(world)]
    return world, ranks, _layers()


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16)


def _assert_all_ranks(ranks, key, want):
    for r, out in enumerate(ranks):
        assert out[key].dtype == torch.bfloat16
        assert torch.equal(_bits(out[key]), _bits(want)), f"rank {r}, {key}"


def test_column_parallel_gathered_output_is_bit_identical(run):
    _, ranks, data = run
    for (n, k), (w, bias, xs) in data["cases"].items():
        layer = MXFP4Linear.from_mxfp4(w, bias)
        for m, x in xs.items():
            _assert_all_ranks(ranks, ("column", n, k, m), layer(x))


def _row_parallel_in_one_process(x, w, world, bias=None):
    """What the row-parallel layers compute, in this process: each rank's float32 partial, the
    rank-order float32 sum, the bias added in float32, one bf16 rounding."""
    parts = [ops.gemm_a4w4_partial(tp.shard_input(x, r, world), tp.shard_rows(w, r, world)) for r in range(world)]
    total = tp.sum_in_rank_order(parts)
    return ops.add_bias(total, bias.bfloat16(), torch.bfloat16) if bias is not None else total.to(torch.bfloat16)


def test_row_parallel_output_is_the_same_on_every_rank_and_deterministic(run):
    world, ranks, data = run
    for (n, k), (w, bias, xs) in data["cases"].items():
        for m, x in xs.items():
            key = ("row", n, k, m)
            _assert_all_ranks(ranks, key, _row_parallel_in_one_process(x, w, world, bias))
            _assert_all_ranks(ranks, ("row again", n, k, m), ranks[0][key])


def test_row_parallel_output_is_within_the_kernels_bound_of_the_one_process_product(run):
    # measured at these seeds: 100% bit-identical to the one-process layer at world 2 and 4 (the
    # in-process cases below count the rare outputs that differ)
    world, ranks, data = run
    identical = elements = 0
    for (n, k), (w, bias, xs) in data["cases"].items():
        layer = MXFP4Linear.from_mxfp4(w, bias)
        for m, x in xs.items():
            y = ranks[0][("row", n, k, m)]
            if bias is None:
                report = testing.check_gemm(y, x, w)
                assert report.violations == 0 and report.nonfinite_mismatch == 0, (n, k, m, report)
            else:  # the bias added to the float32 total: the kernels' bound and one float32 rounding
                exact, magnitude = testing.exact_product(x, w)
                biased = exact + bias.bfloat16().double()
                assert ((y.double() - biased).abs() <= testing.biased_bound(biased, magnitude, k)).all(), (n, k, m)
            identical += int((_bits(y) == _bits(layer(x))).sum())
            elements += y.numel()
    assert identical / elements >= 0.999, identical / elements


def test_naive_bf16_all_reduce_leaves_the_bound(run):
    # the row-parallel tests above could not fail if rounding partials were harmless: rounded bf16
    # partials, added in bf16, break the kernels' bound on ordinary data
    _, ranks, data = run
    violations = 0
    for (n, k), (w, bias, xs) in data["cases"].items():
        for m, x in xs.items():
            violations += testing.check_gemm(ranks[0][("naive", n, k, m)], x, w).violations
    assert violations > 0


def test_three_dimensional_input_and_full_input_to_row_layer(run):
    world, ranks, data = run
    w, bias, _ = data["cases"][(SHAPES[0][0], SHAPES[0][1])]
    _assert_all_ranks(ranks, "x3d column", MXFP4Linear.from_mxfp4(w, bias)(data["x3d"]))
    _assert_all_ranks(ranks, "x3d row", _row_parallel_in_one_process(data["x3d"], w, world, bias))


def test_mlp_column_then_row(run):
    world, ranks, data = run
    p = data["mlp"]
    gate, up = MXFP4Linear.from_mxfp4(p["gate"]), MXFP4Linear.from_mxfp4(p["up"])
    for m, x in p["x"].items():
        h = (torch.nn.functional.silu(gate(x).float()) * up(x).float()).bfloat16()  # column-parallel: these bits
        _assert_all_ranks(ranks, ("mlp", m), _row_parallel_in_one_process(h, p["down"], world, p["down_bias"]))
        report = testing.check_gemm(_row_parallel_in_one_process(h, p["down"], world), h, p["down"])
        assert report.violations == 0 and report.nonfinite_mismatch == 0, (m, report)


# ---- in one process: the pieces the layers are made of -------------------------------------------

def test_quantizing_the_k_shard_gives_the_whole_rows_codes():
    x = torch.randn(37, 1024).bfloat16() * torch.logspace(-3, 3, 1024).bfloat16()
    codes, scales = formats.quantize_codes(x)
    for world in (2, 4, 8):
        for rank in range(world):
            c, s = formats.quantize_codes(tp.shard_input(x, rank, world))
            k0, k1 = rank * 1024 // world, (rank + 1) * 1024 // world
            assert torch.equal(c, codes[:, k0:k1]) and torch.equal(s, scales[:, k0 // 32:k1 // 32])


MODEL_SIZES = (2880, 5760, 2112, 7168, 3072, 1536, 2304, 512, 4096, 14336, 576, 24576)
"""GPT-OSS's and DeepSeek's projection dimensions (N and K), which every world size up to 8 shards."""


@pytest.mark.parametrize("world", (1, 2, 3, 4, 8))
def test_shard_range_covers_model_sizes_evenly_on_32_element_boundaries(world):
    for size in MODEL_SIZES + (48, 1000, 33 * 32 + 16):
        if -(-size // 32) < world:
            continue
        ranges = [tp.shard_range(size, r, world) for r in range(world)]
        assert ranges[0][0] == 0 and ranges[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(a % 32 == 0 for a, _ in ranges)
        widths = [b - a for a, b in ranges]
        assert max(widths) - min(widths) <= 32 and min(widths) > 0, (size, widths)
        if size % (world * 32) == 0:
            assert ranges == [(r * size // world, (r + 1) * size // world) for r in range(world)]


def test_uneven_shards_in_one_process():
    # GPT-OSS down_proj (K = 2880 = 90 blocks, shards of K % 64 == 32 at TP = 4 and 8) and a DeepSeek
    # N (2112 = 66 units of 32 rows), at M = 3 on the reference: bit-identical gathered outputs, and
    # summed outputs within the kernels' bound (measured: all bit-identical at this seed)
    gen = torch.Generator().manual_seed(5)
    for n, k in ((2112, 576), (96, 2880)):
        w = mxfp4.quantize(_randn(gen, n, k))
        x = _randn(gen, 3, k)
        want = mxfp4.gemm_a4w4(x, w)
        for world in (2, 3, 4, 8):
            if n >= world * 32:
                cols = torch.cat([mxfp4.gemm_a4w4(x, tp.shard_columns(w, r, world)) for r in range(world)], -1)
                assert torch.equal(_bits(cols), _bits(want)), (n, k, world)
            report = testing.check_gemm(_row_parallel_in_one_process(x, w, world), x, w)
            assert report.passed, (n, k, world, report)


@pytest.mark.parametrize("world", (2, 3, 4, 8))
def test_row_parallel_in_one_process_meets_the_contract_on_randn_and_model_like_data(world):
    # randn and model-like (outlier channels) activations, K = 7168 and 2880: every output within the
    # bound, and the fraction bit-identical to the one-process reference at least the kernels' 99.9%
    from mxfp4.bench import data

    gen = torch.Generator().manual_seed(world)
    for n, k in ((512, 7168), (1024, 2880)):
        for x, b in ((_randn(gen, 16, k), _randn(gen, n, k)), data.model_like(16, n, k, world, "cpu")):
            w = mxfp4.quantize(b)
            report = testing.check_gemm(_row_parallel_in_one_process(x, w, world), x, w)
            assert report.passed, (n, k, world, report)


def test_column_bits_kept_follows_the_kernels_row_groups():
    from mxfp4 import plan

    small = plan.heuristic(plan.Problem(1, 2112, 512))  # the short-K kernel: no per-group decision
    assert isinstance(small, plan.SmallParams)
    assert tp.column_bits_kept(2112, 8, None) and tp.column_bits_kept(2112, 8, small)
    stream = plan.heuristic(plan.Problem(1, 2112, 576))  # its K cut follows N's tiles
    assert isinstance(stream, plan.StreamParams) and not tp.column_bits_kept(2112, 8, stream)
    assert tp.column_bits_kept(2112, 8, plan.DecodeParams(1, 2, 4, 8, 3))  # no row groups either
    tn64, tn128, int8 = plan.WgmmaParams(64, 3), plan.WgmmaParams(128, 4), plan.WgmmaParams(128, 3, True)
    assert all(tp.column_bits_kept(7168, 8, p) for p in (tn64, tn128, int8))  # 896 rows a rank
    assert tp.column_bits_kept(2112 * 2, 2, tn64) and not tp.column_bits_kept(2112 * 2, 2, int8)
    assert not tp.column_bits_kept(2112 * 2, 2, tn128)  # 2112 rows a rank: 16.5 tiles of 128
    assert not tp.column_bits_kept(2112, 2, tn64)  # 1056 rows a rank: 16.5 groups


@pytest.mark.parametrize("n, k, world", ((256, 512, 4), (336, 352, 4), (1000, 480, 3)))
def test_shards_reassemble_the_weight(n, k, world):
    w = mxfp4.quantize(torch.randn(n, k))
    plain = w.to_layout(mxfp4.Layout.PLAIN)
    cols = [tp.shard_columns(w, r, world) for r in range(world)]
    rows = [tp.shard_rows(w, r, world) for r in range(world)]
    assert all(s.layout is mxfp4.Layout.AITER_SHUFFLED for s in cols + rows)
    cols = [s.to_layout(mxfp4.Layout.PLAIN) for s in cols]
    rows = [s.to_layout(mxfp4.Layout.PLAIN) for s in rows]
    assert torch.equal(torch.cat([s.data for s in cols]), plain.data)
    assert torch.equal(torch.cat([s.scales for s in cols]), plain.scales)
    assert torch.equal(torch.cat([s.data for s in rows], 1), plain.data)
    assert torch.equal(torch.cat([s.scales for s in rows], 1), plain.scales)


def _cancelling_row_weight() -> MXFP4Tensor:
    """Row 0 of a [16, 128] weight: block 0 sums to 192 * 2**30, block 1 to 0.5, block 2 to -192 * 2**30."""
    codes = torch.zeros(16, 128, dtype=torch.uint8)
    codes[0, :32], codes[0, 32], codes[0, 64:96] = 7, 1, 15  # 6.0, 0.5, -6.0
    scales = torch.full((16, 4), 127, dtype=torch.uint8)
    scales[0, 0] = scales[0, 2] = 127 + 30
    return MXFP4Tensor(formats.pack_codes(codes), scales, (16, 128))


def test_float32_partials_are_inside_the_bound_not_bit_identical():
    # x = 1.0 quantizes exactly. One process (exact): 0.5. Two ranks: rank 0's partial 192 * 2**30 + 0.5
    # is 192 * 2**30 in float32 (ulp 2**14), rank 1's cancels it: 0, inside the bound (K/32 * 2**-24 *
    # 384 * 2**30 is 1.5 * 2**16); the one-process kernel's float32 sum loses the 0.5 the same way.
    x = torch.ones(1, 128, dtype=torch.bfloat16)
    w = _cancelling_row_weight()
    assert mxfp4.gemm_a4w4(x, w)[0, 0].item() == 0.5
    two = _row_parallel_in_one_process(x, w, 2)
    assert two[0, 0].item() == 0.0
    report = testing.check_gemm(two, x, w)
    assert report.violations == 0 and report.identical_fraction < 1


def test_errors_name_the_argument_and_rule():
    w = mxfp4.quantize(torch.randn(96, 224))
    with pytest.raises(ValueError, match=r"column parallel: weight N \(96\) must hold at least world_size \(4\) "
                                         r"units of 32 \(one per rank.*it holds 3"):
        tp.shard_columns(w, 0, 4)
    with pytest.raises(ValueError, match=r"row parallel: weight K \(224\) must hold at least world_size \(8\)"):
        tp.shard_rows(w, 0, 8)
    with pytest.raises(ValueError, match=r"shard has 48 rows; rank 0 of 2 holds rows \[0, 32\) of out_features"):
        tp.ColumnParallelMXFP4Linear(mxfp4.quantize(torch.randn(48, 64)), None, out_features=96, rank=0,
                                     world_size=2)
    with pytest.raises(ValueError, match=r"rank must be in \[0, world_size\) = \[0, 2\), got 2"):
        tp.shard_rows(w, 2, 2)
    with pytest.raises(TypeError, match="weight must be an MXFP4Tensor"):
        tp.shard_rows(torch.zeros(4, 4), 0, 1)
    with pytest.raises(ValueError, match=r"bias must be a tensor of shape \(128,\)"):
        tp.ColumnParallelMXFP4Linear.from_mxfp4(mxfp4.quantize(torch.randn(128, 384)), torch.zeros(3), rank=0,
                                                world_size=2)
    with pytest.raises(TypeError, match="layer must be a mxfp4.nn.MXFP4Linear"):
        tp.RowParallelMXFP4Linear.from_layer(torch.nn.Linear(64, 64), rank=0, world_size=1)


def test_world_size_one_equals_the_layer_without_a_process_group():
    w = mxfp4.quantize(torch.randn(64, 256))
    x = torch.randn(5, 256).bfloat16()
    layer = MXFP4Linear.from_mxfp4(w)
    col = tp.ColumnParallelMXFP4Linear.from_layer(layer, rank=0, world_size=1, gather_output=True)
    row = tp.RowParallelMXFP4Linear.from_layer(layer, rank=0, world_size=1)
    assert torch.equal(col(x), layer(x)) and torch.equal(row(x), layer(x))  # one partial, rounded once
    assert col.kept_bytes() == row.kept_bytes() == layer.kept_bytes()


def test_gpu_run_script_runs_at_world_size_one_on_the_cpu():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(pathlib.Path(mxfp4.__file__).parents[1])
    done = subprocess.run([sys.executable, "-m", "mxfp4.bench.distributed", "--tokens", "1,3", "--hidden", "128",
                           "--intermediate", "256", "--no-task-shapes"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all promised checks hold" in done.stdout and "bf16_tp_ms" in done.stdout and "row_vs_one" in done.stdout


# ---- on a Hopper GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("m", [1, 16, 100, 333])
def test_row_parallel_on_the_kernels_within_the_bound_of_the_one_process_layer(world, m):
    """What each rank of a row-parallel layer computes, all ranks in this process: the kernels' float32
    partials of the K-shards added in rank order and rounded once (world 1: the layer itself)."""
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
