"""The benchmark harness: providers side by side on a shape set, under the competition timing rule,
against ceilings measured in the same run. ``mxfp4 bench`` calls :func:`add_arguments` and
:func:`main`; ``python -m mxfp4.bench.harness`` does the same.

Without CUDA, only the mxfp4 provider runs, on the reference path, timed by the wall clock: those
figures check that the harness and the numerics work, and say nothing about GPU speed.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from typing import Callable

import torch

from .. import task, testing
from . import report
from .report import Row
from .providers import PROVIDERS, Provider, fp8_rowwise, resolve_providers, scaled_mm
from .shapes import SHAPE_SETS, Shape, parse_shapes, shape_set
from .timing import FLUSH_BYTES, ColdTimer, Timing, summarize

CPU_LABEL = "CPU reference path, wall-clock, not comparable"
GPU_LABEL = "CUDA events, L2 flushed and a 4 ms GPU spin before each call (launch cost hidden)"


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """Rates measured on this GPU in this run: copy bandwidth (bytes read + written per second),
    bf16 and fp8 matmul FLOP/s (fp8 None when _scaled_mm is unavailable)."""

    copy_bytes_per_s: float
    bf16_flops: float
    fp8_flops: float | None = None

    @property
    def rate(self) -> float:
        """The compute ceiling of the floor: fp8 when measured (the A4W4 kernel issues fp8 MMAs)."""
        return self.fp8_flops or self.bf16_flops

    def floor_us(self, shape: Shape) -> float:
        """max(bytes moved / copy bandwidth, FLOPs / rate), in microseconds."""
        return max(shape.bytes_moved / self.copy_bytes_per_s, shape.flops / self.rate) * 1e6

    def to_dict(self) -> dict:
        fp8 = None if self.fp8_flops is None else self.fp8_flops / 1e12
        return {"copy_TBps": self.copy_bytes_per_s / 1e12, "bf16_TFLOPs": self.bf16_flops / 1e12,
                "fp8_TFLOPs": fp8, "floor_rate": "fp8" if fp8 else "bf16"}


def _mean_event_us(fn: Callable[[], object], reps: int = 10, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def measure_ceilings(device: torch.device) -> Ceilings:
    """Copy bandwidth (1 GiB device-to-device), bf16 and fp8 8192^3 matmul rates, warm, back to back."""
    nbytes = 1 << 30
    src = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    copy_bw = 2 * nbytes / (_mean_event_us(lambda: dst.copy_(src)) * 1e-6)
    del src, dst
    s = 8192
    a = torch.randn((s, s), dtype=torch.bfloat16, device=device)
    b = torch.randn((s, s), dtype=torch.bfloat16, device=device)
    flops = 2 * s ** 3
    bf16 = flops / (_mean_event_us(lambda: torch.mm(a, b.t())) * 1e-6)
    fp8 = None
    try:
        (a8, sa), (b8, sb) = fp8_rowwise(a), fp8_rowwise(b)
        sb = sb.reshape(1, -1).contiguous()
        fp8 = flops / (_mean_event_us(lambda: scaled_mm(a8, b8, sa, sb)) * 1e-6)
    except (RuntimeError, AttributeError, TypeError) as exc:
        print(f"fp8 matmul rate not measured ({str(exc).splitlines()[0]}); the floor uses bf16")
    return Ceilings(copy_bw, bf16, fp8)


def _wall_time(fn: Callable[[], object], runs: int) -> Timing:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return summarize(samples)


class _Progress:
    """tqdm when importable, else one printed line per step."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled, self.bar = total, 0, enabled, None
        if enabled:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc="bench", unit="run")
            except ImportError:
                pass

    def start(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(what)
        elif self.enabled:
            print(f"[{self.done + 1}/{self.total}] {what}", flush=True)

    def step(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update()

    def write(self, text: str) -> None:
        (self.bar.write if self.bar is not None else print)(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _measure(row: Row, p: Provider, data, product: tuple[torch.Tensor, torch.Tensor], device: torch.device,
             timer: ColdTimer | None, budget_s: float, cpu_runs: int, rows: torch.Tensor | None = None) -> None:
    """Check (on ``rows`` of the output, all when None: see testing.sample_rows) and time one provider.
    ``product``: testing.exact_product of the shape's operands on those rows, computed once per shape."""
    exact = product[0]
    built = p.build(data, device, timer=timer)
    row.note = built.note
    if not built.available:
        row.status = "skipped"
        return
    out = built.fn()
    if p.gemm and rows is not None:
        out = out[rows.to(out.device)]
    if p.gemm:
        diff = (out.to(torch.float64) - exact).norm()
        row.rel_err = float(diff / exact.norm().clamp(min=1e-300))
    if p.exact:
        rep = testing.compare_with_exact(out, *product)
        row.max_excess, row.identical_fraction, row.passes = rep.max_excess, rep.identical_fraction, rep.passed
    del out
    t = timer.time(built.fn, budget_s=budget_s) if timer is not None else _wall_time(built.fn, cpu_runs)
    row.us, row.std_us, row.best_us, row.worst_us, row.runs = t.mean_us, t.std_us, t.best_us, t.worst_us, t.runs


def _finish_shape(rows: list[Row], shape: Shape, ceilings: Ceilings | None) -> None:
    by_name = {r.provider: r for r in rows if r.status == "ok"}
    bf16 = by_name.get("cublas_bf16")
    probe = by_name.get("stream_floor")
    floor = ceilings.floor_us(shape) if ceilings is not None else math.nan
    for r in rows:
        if r.status != "ok":
            continue
        r.tflops = shape.flops / r.us / 1e6
        r.gbps = shape.bytes_moved / r.us / 1e3
        r.floor_us, r.pct_of_floor = floor, floor / r.us * 100
        if bf16 is not None:
            r.speedup_vs_bf16 = bf16.us / r.us
        if probe is not None:
            r.stream_floor_us, r.pct_of_stream_floor = probe.us, probe.us / r.us * 100


def run(shapes: tuple[Shape, ...] | list[Shape], providers: tuple[Provider, ...] | list[Provider],
        device: torch.device | str, budget_s: float = 1.0, progress: bool = True, *,
        ceilings: Ceilings | None = None, cpu_max_gflop: float = 4.0, cpu_runs: int = 3,
        flush_bytes: int = FLUSH_BYTES) -> list[Row]:
    """Build and time every provider on every shape; one :class:`Row` per (shape, provider).

    On CUDA: the competition rule (:class:`ColdTimer`), ``budget_s`` of wall time per timing, and
    ceilings measured here unless given. Without CUDA: GPU-only providers are skipped, the others
    are timed by the wall clock ``cpu_runs`` times, shapes over ``cpu_max_gflop`` are skipped.
    """
    device = torch.device(device)
    cuda = device.type == "cuda"
    if cuda and ceilings is None:
        ceilings = measure_ceilings(device)
    timer = ColdTimer(device, flush_bytes) if cuda else None
    bar = _Progress(len(shapes) * len(providers), progress)
    rows: list[Row] = []
    try:
        for shape in shapes:
            shape_rows = [Row(shape.m, shape.n, shape.k, shape.seed, shape.group, p.name,
                              timing=GPU_LABEL if cuda else CPU_LABEL) for p in providers]
            rows += shape_rows
            gflop = shape.flops / 1e9
            if not cuda and gflop > cpu_max_gflop:
                for r in shape_rows:
                    r.status, r.note = "skipped", f"too large for the CPU ({gflop:.3g} > {cpu_max_gflop:g} GFLOP)"
                    bar.step()
                continue
            data = task.generate_input(shape.m, shape.n, shape.k, shape.seed, device)
            rows_checked = testing.sample_rows(shape.m)
            product = testing.exact_product(data[0], task.weight_from_task(data[3], data[4], shape.k),
                                            rows_checked)
            for p, r in zip(providers, shape_rows):
                bar.start(f"{shape.label} {p.name}")
                if not cuda and p.gpu_only:
                    r.status, r.note = "skipped", p.build(data, device).note or "needs a CUDA GPU"
                else:
                    try:
                        _measure(r, p, data, product, device, timer, budget_s, cpu_runs, rows_checked)
                    except Exception as exc:  # one broken provider must not end the run
                        r.status, r.note = "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                        bar.write(f"{shape.label} {p.name} failed: {r.note}")
                bar.step()
            _finish_shape(shape_rows, shape, ceilings)
            del data, product
    finally:
        bar.close()
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mxfp4 bench``."""
    parser.add_argument("--shapes-set", default="bench", choices=tuple(SHAPE_SETS),
                        help="named shape set (default: the task's benchmark shapes)")
    parser.add_argument("--shapes", nargs="+", metavar="M,N,K", help="explicit shapes m,n,k[,seed]; overrides --shapes-set")
    parser.add_argument("--providers", nargs="+", metavar="NAME",
                        help=f"providers to run, space or comma separated (default: all of {', '.join(PROVIDERS)})")
    parser.add_argument("--budget", type=float, default=1.0, metavar="SECONDS",
                        help="wall-clock budget of one timing (stops earlier at 1%% relative error)")
    parser.add_argument("--out", default=None, metavar="DIR", help="output folder (default: results/<UTC timestamp>/)")
    parser.add_argument("--no-plot", action="store_true", help="do not write the PNG")
    parser.add_argument("--cpu-max-gflop", type=float, default=4.0, metavar="GFLOP",
                        help="without CUDA, skip shapes with more GFLOP than this (default 4)")
    parser.add_argument("--flush-gib", type=float, default=FLUSH_BYTES / 2 ** 30, metavar="GIB",
                        help="bytes written to flush L2 before each timed call (default 0.5 GiB; a GPU spin after it hides the Python launch)")
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"),
                        help="auto: CUDA when available, else the CPU reference path")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    """Run ``mxfp4 bench``: 0 when every mxfp4 result that ran passed the exactness check, 1 if
    one failed, 2 for bad arguments."""
    try:
        shapes = parse_shapes(args.shapes) if args.shapes else shape_set(args.shapes_set)
        providers = resolve_providers(args.providers)
        if args.budget <= 0 or args.flush_gib <= 0:
            raise ValueError(f"--budget and --flush-gib must be positive, got {args.budget}, {args.flush_gib}")
    except ValueError as exc:
        print(f"mxfp4 bench: {exc}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("mxfp4 bench: --device cuda given but no CUDA GPU was found", file=sys.stderr)
        return 2
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if cuda else "cpu")
    if cuda:
        print(f"GPU: {torch.cuda.get_device_name(device)}; measuring copy bandwidth and matmul rates ...")
        ceilings = measure_ceilings(device)
        c = ceilings.to_dict()
        fp8 = "n/a" if c["fp8_TFLOPs"] is None else f"{c['fp8_TFLOPs']:.0f}"
        print(f"ceilings: copy {c['copy_TBps']:.2f} TB/s, bf16 {c['bf16_TFLOPs']:.0f} TFLOP/s, fp8 {fp8} TFLOP/s")
    else:
        ceilings = None
        reason = "no CUDA GPU was found" if args.device == "auto" else "--device cpu"
        print(f"{reason}: running the mxfp4 provider on the CPU reference path with wall-clock timing "
              f"({CPU_LABEL}); GPU-only providers are skipped.")
    rows = run(shapes, providers, device, args.budget, progress=not args.no_progress, ceilings=ceilings,
               cpu_max_gflop=args.cpu_max_gflop, flush_bytes=int(args.flush_gib * 2 ** 30))
    summary = report.summarize(rows)
    print(report.format_table(rows, summary))
    meta = report.metadata(device, ceilings, shape_set=None if args.shapes else args.shapes_set,
                           budget_s=args.budget, timing=GPU_LABEL if cuda else CPU_LABEL,
                           flush_bytes=int(args.flush_gib * 2 ** 30))
    meta["providers"] = {p.name: p.description for p in providers}
    for path in report.write_results(rows, summary, meta, out_dir=args.out, plot=not args.no_plot):
        print(f"wrote {path}")
    bad = [r for r in rows if r.provider == "mxfp4" and (r.status == "failed" or r.passes is False)]
    for r in bad:
        print(f"mxfp4 FAILED on {r.label}: {r.note or f'max excess {r.max_excess:.3g}'}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m mxfp4.bench.harness", description="mxfp4 benchmark: providers side by side under the competition timing rule")
    add_arguments(_parser)
    sys.exit(main(_parser.parse_args()))
