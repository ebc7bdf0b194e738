"""How much of a call's time is its operands' first trip from DRAM (GPU).

Each shape's call (the table's config) and cuBLAS bf16's are timed under the bench's rule (L2
flushed before each call), and again with one operand read back into L2 between the flush and
the start event: the weight (for the library: the folded weight's arrays, what the kernels
read; for cuBLAS: its bf16 weight), A, or both. The difference between "cold" and "W warm" is
what the weight's DRAM trip costs the call beyond what the rest of the call hides; a kernel
whose time hardly moves is bound on the chip, not by the weight's bytes. The last column of each
("twin") has the same call made on other operands of the same shape between the flush and the
start event: the kernels' code, the launch's constant data and the library's scratch buffers are
then warm, the call's own operands cold.

Usage (on the GPU box, from the repo root):
  PYTHONPATH=src python3 tools/warm_probe.py M,N,K [M,N,K ...]
"""
from __future__ import annotations

import sys

import torch

from mxfp4 import launch, ops, task, testing
from mxfp4.fold import PackedFold
from mxfp4.bench.timing import ColdTimer

from knob_ab import config_tag


def _touch(tensors: list[torch.Tensor], sink: torch.Tensor) -> None:
    """Read every byte of ``tensors`` into L2 (a sum of each, as int32 words where the size
    allows, into ``sink``)."""
    for t in tensors:
        flat = t.reshape(-1)
        words = flat.view(torch.int32) if flat.numel() * flat.element_size() % 4 == 0 else flat
        sink += words.sum(dtype=None if words.is_floating_point() else torch.int64).to(sink.dtype)


def timed(timer: ColdTimer, fn, warm: list[torch.Tensor], sink: torch.Tensor, runs: int = 30, twin=None) -> float:
    """Mean us of ``fn`` over ``runs`` calls under the bench's timer (flush, spin, event, call,
    event), with ``warm`` read into L2 after each flush and then ``twin()`` called if given (after
    one untimed call, which compiles or creates a library handle)."""
    if twin is not None:
        twin()  # its first call may fold its weight or compile: not inside a timed window
    def after_flush():
        _touch(warm, sink)
        if twin is not None:
            twin()
    return timer.time(fn, min_runs=runs, max_runs=runs, warmup=1, after_flush=after_flush).mean_us


def task_inputs(m: int, n: int, k: int, seed: int):
    """(A, bf16 weight, MXFP4 weight, output) of the task's generator for one shape."""
    data = task.generate_input(m, n, k, seed, device="cuda")
    return data[0], data[1], task.weight_from_task(data[3], data[4], k), torch.empty(m, n, dtype=torch.bfloat16,
                                                                                     device="cuda")


def folded_weight_parts(w) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(values, factors) of the folds the library cached on MXFP4 weight ``w`` (what the int8
    kernels read in place of its codes and scales): the folded values (a packed fold's codes and
    block shifts), and the block and segment factors with the fold flags."""
    folds = [f for _, f in getattr(w.data, "_mxfp4_folds", {}).values()]
    values = [t for f in folds for t in ((f.codes, f.shift) if isinstance(f, PackedFold) else (f.q,))]
    return values, [t for f in folds for t in (f.block_scale, f.seg_scale, f.folded)]


def folded_weight_tensors(w) -> list[torch.Tensor]:
    """Every array of the folds cached on ``w`` (:func:`folded_weight_parts`)."""
    values, factors = folded_weight_parts(w)
    return values + factors


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    timer = ColdTimer("cuda")
    sink = torch.zeros((), dtype=torch.int64, device="cuda")
    print(f"{'shape':>16} {'kernel':>36} | {'cold':>6} {'W warm':>7} {'A warm':>7} {'both':>6} {'twin':>6} | "
          f"{'bf16 cold':>9} {'W warm':>7} {'both':>6} {'twin':>6}")
    for arg in argv:
        m, n, k = map(int, arg.split(","))
        a, b, w, out = task_inputs(m, n, k, m + n + k)
        a2, b2, w2, out2 = task_inputs(m, n, k, m + n + k + 1)
        cfg = ops.resolve_config(m, n, k, torch.device("cuda"))
        call = lambda: launch.launch_a4w4(a, w, out, cfg)  # noqa: E731
        call()
        exact = testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
        w_arrays = folded_weight_tensors(w)
        mine = [timed(timer, call, warm, sink) for warm in ([], w_arrays, [a], w_arrays + [a])]
        mine.append(timed(timer, call, [], sink, twin=lambda: launch.launch_a4w4(a2, w2, out2, cfg)))
        cublas = lambda: a @ b.T  # noqa: E731
        theirs = [timed(timer, cublas, warm, sink) for warm in ([], [b], [a, b])]
        theirs.append(timed(timer, cublas, [], sink, twin=lambda: a2 @ b2.T))
        mb = sum(t.numel() * t.element_size() for t in w_arrays) / 1e6
        tag = config_tag(cfg)
        print(f"{m}x{n}x{k:<6} {tag:>36} | {mine[0]:6.2f} {mine[1]:7.2f} {mine[2]:7.2f} {mine[3]:6.2f} "
              f"{mine[4]:6.2f} | {theirs[0]:9.2f} {theirs[1]:7.2f} {theirs[2]:6.2f} {theirs[3]:6.2f}   "
              f"W arrays {mb:.1f} MB exact {exact}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
