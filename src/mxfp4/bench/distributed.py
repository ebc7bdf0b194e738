"""The tensor-parallel run: sharded layers against the one-GPU layer, and a decoder-MLP step timed.

    torchrun --nproc-per-node 2 -m mxfp4.bench.distributed  # two GPUs, NCCL
    python -m mxfp4.bench.distributed                       # world size 1: one GPU (or the CPU, gloo)

Every rank builds the same full weights and inputs from seeds, so the one-GPU layer is computed
on each rank beside its shard. Shapes that do not divide by the world size take uneven shards
(:func:`mxfp4.distributed.shard_range`). Checked, per shape: the column-parallel output (gathered)
against the one-GPU MXFP4Linear (the kernel on a Hopper GPU), bit for bit where
:func:`mxfp4.distributed.column_bits_kept` promises it, and within the kernels' bound of the exact
product (first rows) everywhere; the row-parallel output within that bound (first rows), the same
bits on every rank, and how often it is bit-identical to the one-GPU layer and to the exact
reference. Shapes: the task's, and a Llama-style MLP (gate, up column-parallel; down row-parallel)
at M = 1, 16, 256, 4096. Timed, per M: the row-parallel down layer against the one-GPU layer (and,
what a rank of a larger world runs besides the gather, the float32 partial and its rounding), and
one MLP step (gate, up, SiLU * up, down) as MXFP4 TP=W (float32 partials gathered and added in rank
order), MXFP4 TP=W with bf16 partials and a bf16 all-reduce (outside the kernels' bound), MXFP4 on
one GPU, bf16 TP=W (the usual column/row split with a bf16 all-reduce) and bf16 on one GPU.
NVLink multicast stays off: the environment says so before the process group exists.
Exit status 1 when a check that the layers promise fails (bits, bound, ranks agreeing).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import distributed as tp, ops, plan, task, testing
from ..nn import MXFP4Linear
from ..tensor import quantize

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
"""Set before the process group: NVLink multicast can put the host's GPUs out of service."""

CHECK_ROWS = 64
"""Rows of each output checked against the exact product (the float64 oracle holds [rows, K])."""


def _init() -> tuple[int, int, torch.device]:
    os.environ.update(MULTICAST_OFF)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if "MASTER_ADDR" in os.environ:
        dist.init_process_group(backend, rank=rank, world_size=world)
    else:
        if world != 1:
            raise RuntimeError("WORLD_SIZE > 1 needs torchrun (MASTER_ADDR, MASTER_PORT)")
        store = tempfile.NamedTemporaryFile(prefix="mxfp4-tp-", delete=False).name
        dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
    return rank, world, device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_ms(fn, device: torch.device, budget_s: float = 1.0, max_iters: int = 50) -> float:
    """Mean wall time of one call in ms, all ranks starting together (warm caches; a step, not a kernel)."""
    fn()
    _sync(device)
    dist.barrier()
    iters, start = 0, time.perf_counter()
    while iters < max_iters and (iters < 3 or time.perf_counter() - start < budget_s):
        fn()
        iters += 1
        if iters % 3 == 0:
            _sync(device)
    _sync(device)
    elapsed = time.perf_counter() - start
    dist.barrier()
    return elapsed / iters * 1e3


def _same(x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of bit-identical bf16 elements."""
    return (x.view(torch.int16) == y.view(torch.int16)).double().mean().item() if x.numel() else 1.0


def _randn(gen: torch.Generator, shape, device) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=torch.bfloat16)


def check_layer(label: str, w, x: torch.Tensor, rank: int, world: int) -> dict:
    """Column- and row-parallel outputs of one weight against the one-GPU layer and the exact reference."""
    one = MXFP4Linear.from_mxfp4(w)
    y_one = one(x)
    col = tp.ColumnParallelMXFP4Linear.from_layer(one, rank=rank, world_size=world, gather_output=True)
    row = tp.RowParallelMXFP4Linear.from_layer(one, rank=rank, world_size=world)
    y_col = col(x)
    y_row = row(tp.shard_input(x, rank, world))
    y_ref = ops.gemm_a4w4(x, one.weight, backend="reference")
    n, k = w.shape
    params = (ops.params_for(plan.Problem(x.shape[0], n, k), x.device)
              if ops.select_backend(x, one.weight) == "cuda" else None)
    ref, mag = testing.exact_product(x[:CHECK_ROWS], one.weight)
    bound = testing.kernel_bound(ref, mag, k)
    bits = y_row.view(torch.int16).to(torch.int64)
    checksums = [torch.empty(2, dtype=torch.int64, device=x.device) for _ in range(world)]
    dist.all_gather(checksums, torch.stack([bits.sum(), (bits * bits).sum()]))
    return {"layer": label, "m": x.shape[0], "n": n, "k": k,
            "column_vs_one": _same(y_col, y_one), "column_bits": tp.column_bits_kept(n, world, params),
            "column_in_bound": bool(((y_col[:CHECK_ROWS].double() - ref).abs() <= bound).all()),
            "row_in_bound": bool(((y_row[:CHECK_ROWS].double() - ref).abs() <= bound).all()),
            "row_ranks_agree": all(torch.equal(c, checksums[0]) for c in checksums),
            "row_vs_one": _same(y_row, y_one), "row_vs_ref": _same(y_row, y_ref), "one_vs_ref": _same(y_one, y_ref)}


def time_row_layer(gen, hidden: int, inter: int, m: int, rank: int, world: int, device) -> dict:
    """The row-parallel down layer [hidden, inter] against the one-GPU layer, ms per call; and the
    float32 partial of this rank's shard with its rounding (a larger world's rank, less the gather)."""
    one = MXFP4Linear.from_mxfp4(quantize(_randn(gen, (hidden, inter), device)))
    row = tp.RowParallelMXFP4Linear.from_layer(one, rank=rank, world_size=world)
    x = _randn(gen, (m, inter), device)
    xs = tp.shard_input(x, rank, world)
    one_ms = _time_ms(lambda: one(x), device)
    row_ms = _time_ms(lambda: row(xs), device)
    partial_ms = _time_ms(lambda: ops.gemm_a4w4_partial(xs, row.weight).to(torch.bfloat16), device)
    return {"m": m, "n": hidden, "k": inter, "one_ms": one_ms, "row_ms": row_ms, "row_vs_one": row_ms / one_ms,
            "f32_partial_ms": partial_ms, "f32_partial_vs_one": partial_ms / one_ms}


def _mlp_steps(gen, hidden: int, inter: int, m: int, rank: int, world: int, device) -> dict:
    """One MLP step in five ways, timed; returns ms per step."""
    weights = {name: _randn(gen, shape, device) for name, shape in
               (("gate", (inter, hidden)), ("up", (inter, hidden)), ("down", (hidden, inter)))}
    x = _randn(gen, (m, hidden), device)
    q = {name: quantize(t) for name, t in weights.items()}
    one = {name: MXFP4Linear.from_mxfp4(t) for name, t in q.items()}
    kw = dict(rank=rank, world_size=world)
    gate = tp.ColumnParallelMXFP4Linear.from_layer(one["gate"], **kw)
    up = tp.ColumnParallelMXFP4Linear.from_layer(one["up"], **kw)
    down = tp.RowParallelMXFP4Linear.from_layer(one["down"], **kw)
    lo, hi = tp.shard_range(inter, rank, world)  # the bf16 TP baseline splits as the MXFP4 layers do
    bf = {"gate": weights["gate"][lo:hi], "up": weights["up"][lo:hi], "down": weights["down"][:, lo:hi].contiguous()}

    def act(g, u):
        return (F.silu(g.float()) * u.float()).bfloat16()

    def mxfp4_tp():
        return down(act(gate(x), up(x)))

    def mxfp4_tp_bf16_partials():
        y = ops.gemm_a4w4(act(gate(x), up(x)), down.weight)
        dist.all_reduce(y)
        return y

    def mxfp4_one():
        return one["down"](act(one["gate"](x), one["up"](x)))

    def bf16_tp():
        y = act(x @ bf["gate"].t(), x @ bf["up"].t()) @ bf["down"].t()
        dist.all_reduce(y)
        return y

    def bf16_one():
        return act(x @ weights["gate"].t(), x @ weights["up"].t()) @ weights["down"].t()

    same = _same(mxfp4_tp(), mxfp4_one())
    times = {name: _time_ms(fn, device) for name, fn in
             (("mxfp4_tp_ms", mxfp4_tp), ("mxfp4_tp_bf16_partials_ms", mxfp4_tp_bf16_partials),
              ("mxfp4_one_ms", mxfp4_one), ("bf16_tp_ms", bf16_tp), ("bf16_one_ms", bf16_one))}
    return {"m": m, "mlp_tp_vs_one": same, **times}


def _print_table(rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(rows[0])
    print(" ".join(f"{k:>14}" for k in keys))
    for r in rows:
        print(" ".join(f"{v:>14.4f}" if isinstance(v, float) else f"{str(v):>14}" for v in r.values()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mxfp4.bench.distributed", description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", default="1,16,256,4096", help="token counts for the model layer and the MLP step")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=14336)
    parser.add_argument("--no-task-shapes", action="store_true", help="skip the task's shapes")
    parser.add_argument("--no-timing", action="store_true", help="checks only")
    args = parser.parse_args(argv)
    ms = [int(v) for v in args.tokens.split(",")]

    rank, world, device = _init()
    try:
        gen = torch.Generator(device=device).manual_seed(2026)
        checks = []
        if not args.no_task_shapes:
            for m, n, k, seed in task.BENCHMARK_SHAPES + task.TEST_SHAPES:
                if min(n, k) < world * tp.SHARD_UNIT:
                    if rank == 0:
                        print(f"task {m}x{n}x{k}: N or K holds fewer than {world} units of {tp.SHARD_UNIT}; skipped")
                    continue
                a, _b, _bq, b_shuffle, b_scale = task.generate_input(m, n, k, seed, device)
                checks.append(check_layer("task", task.weight_from_task(b_shuffle, b_scale, k), a, rank, world))
        for name, (n, k) in (("gate", (args.intermediate, args.hidden)), ("down", (args.hidden, args.intermediate))):
            w = quantize(_randn(gen, (n, k), device))
            for m in ms:
                checks.append(check_layer(name, w, _randn(gen, (m, k), device), rank, world))
        rows = [] if args.no_timing else [time_row_layer(gen, args.hidden, args.intermediate, m, rank, world, device)
                                          for m in ms]
        steps = [] if args.no_timing else [_mlp_steps(gen, args.hidden, args.intermediate, m, rank, world, device)
                                           for m in ms]
        failed = [c for c in checks if (c["column_bits"] and c["column_vs_one"] < 1) or not c["column_in_bound"]
                  or not c["row_in_bound"] or not c["row_ranks_agree"]]
        failed_ranks = torch.tensor([1.0 if failed else 0.0], device=device)
        dist.all_reduce(failed_ranks)  # every rank checks its own outputs; rank 0 reports for all
        if rank == 0:
            name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
            print(f"tensor parallel, world size {world}, {dist.get_backend()}, {name}, torch {torch.__version__}")
            print("bit-identical fractions (column vs one-GPU layer; row vs one-GPU layer, vs exact reference):")
            _print_table(checks)
            if rows:
                print(f"row-parallel down layer, ms per call, world size {world} (row_vs_one: the ratio; "
                      "f32_partial: this rank's float32 partial rounded to bf16):")
                _print_table(rows)
            if steps:
                print(f"MLP step (hidden {args.hidden}, intermediate {args.intermediate}), ms per step, "
                      f"world size {world}:")
                _print_table(steps)
            if failed_ranks.item():
                print(f"FAILED on {int(failed_ranks.item())} rank(s); rank 0: "
                      + ", ".join(f"{c['layer']} {c['m']}x{c['n']}x{c['k']}" for c in failed))
            else:
                print("all promised checks hold")
        return 1 if failed_ranks.item() else 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(main())
