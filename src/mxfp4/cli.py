"""The ``mxfp4`` command: info, check, bench, tune."""
from __future__ import annotations

import argparse
import os
import sys

import torch


def _info(args: argparse.Namespace) -> int:
    from . import __version__, ops
    from .tuning import SHIPPED_TABLES

    try:
        import triton

        triton_v = triton.__version__
    except Exception as exc:  # the CPU path works without triton
        triton_v = f"not importable ({type(exc).__name__})"
    print(f"mxfp4 {__version__}; torch {torch.__version__}; triton {triton_v}")
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        a = torch.empty(1, 32, dtype=torch.bfloat16, device="cuda")
        table = SHIPPED_TABLES.get(name)
        print(f"device: {name} (CUDA {torch.version.cuda}); gemm_a4w4 on CUDA tensors takes the "
              f"'{ops.select_backend(a)}' backend; shipped tuned table: {table or 'none for this GPU (heuristic configs)'}")
    else:
        print("device: no CUDA GPU found; gemm_a4w4 takes the 'reference' backend (exact PyTorch, CPU)")
    if ops.interpreter_enabled():
        print("TRITON_INTERPRET is set: backend='triton' runs the kernels in Triton's CPU interpreter")
    return 0


def _check(args: argparse.Namespace) -> int:
    from . import task, testing

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = task.TEST_SHAPES + (task.BENCHMARK_SHAPES if args.all else ())
    path = "Triton kernel" if dev == "cuda" else "CPU reference path"
    print(f"checking custom_kernel on {len(shapes)} task shapes ({path}) against the exact product")
    print(f"{'m':>5} {'n':>5} {'k':>5}  {'identical':>9}  {'violations':>10}  {'max err/bound':>13}  result")
    failed = 0
    for m, n, k, seed in shapes:
        data = task.generate_input(m, n, k, seed, device=dev)
        out = task.custom_kernel(data)
        rep = testing.check_gemm(out, data[0], task.weight_from_task(data[3], data[4], k))
        failed += not rep.passed
        print(f"{m:>5} {n:>5} {k:>5}  {rep.identical_fraction:>9.5f}  {rep.violations:>10d}  "
              f"{rep.max_excess:>13.3f}  {'pass' if rep.passed else 'FAIL'}")
    print("all passed" if not failed else f"{failed} shape(s) FAILED")
    return 1 if failed else 0


def _merged(path: str, new):
    """``new`` plus the entries of the table at ``path`` for shapes it did not tune (same GPU and
    triton only; another table is replaced, said so)."""
    from .tuning import TunedTable, load_table, table_matches

    try:
        old = load_table(path)
    except ValueError as exc:
        print(f"mxfp4 tune: replacing {path}: {exc}")
        return new
    reason = table_matches(old, new.gpu, new.triton)
    if reason:
        print(f"mxfp4 tune: replacing {path}: {reason}")
        return new
    tuned = {shape for shape, _ in new.entries}
    kept = tuple(e for e in old.entries if e[0] not in tuned)
    print(f"mxfp4 tune: kept {len(kept)} entries of {path} for shapes not tuned now")
    return TunedTable(new.gpu, new.triton, new.package, kept + new.entries)


_CANDIDATES = {"all": "candidate_configs", "persistent": "persistent_candidates", "direct": "direct_candidates",
               "int8": "int8_candidates", "int8_fused": "fused_candidates", "int8_meet": "meet_candidates"}
"""``mxfp4 tune --kernel`` name -> the :mod:`mxfp4.tuner` function listing its candidates."""


def _kernel_list(text: str) -> str:
    names = [x for x in text.split(",") if x]
    unknown = [x for x in names if x not in _CANDIDATES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown kernel(s) {', '.join(unknown) or repr(text)}; "
                                         f"choose from {', '.join(_CANDIDATES)}")
    return ",".join(names)


def _tune(args: argparse.Namespace) -> int:
    from .bench.shapes import parse_shapes, shape_set
    from .tuner import tune

    if not torch.cuda.is_available():
        print("mxfp4 tune: needs a CUDA GPU (it times the Triton kernel)", file=sys.stderr)
        return 2
    try:
        shapes = (parse_shapes(args.shapes) if args.shapes
                  else [s for name in args.shapes_set.split(",") for s in shape_set(name)])
        if args.m:
            keep = {int(v) for v in args.m.split(",")}
            shapes = [s for s in shapes if s.m in keep]
    except ValueError as exc:
        print(f"mxfp4 tune: {exc}", file=sys.stderr)
        return 2
    from . import tuner

    pick = [getattr(tuner, _CANDIDATES[name]) for name in args.kernel.split(",")]
    candidates = pick[0] if len(pick) == 1 else lambda m, n, k: [c for fn in pick for c in fn(m, n, k)]
    table, trials = tune([(s.m, s.n, s.k) for s in shapes], candidates=candidates, progress=not args.no_progress,
                         jobs=args.jobs)
    if args.trials:
        tuner.write_trials(trials, args.trials)
    rejected = [t for t in trials if not t.passed]
    for t in rejected:
        print(f"rejected {t.m}x{t.n}x{t.k} {t.config}: {t.note}")
    print(f"{'m':>5} {'n':>5} {'k':>5}  {'us':>7}  config")
    for (m, n, k), cfg in table.entries:
        us = min(t.us for t in trials if (t.m, t.n, t.k) == (m, n, k) and t.passed)
        print(f"{m:>5} {n:>5} {k:>5}  {us:7.2f}  {cfg}")
    if os.path.exists(args.out) and not args.replace:
        table = _merged(args.out, table)
    table.save(args.out)
    print(f"wrote {args.out} ({len(table.entries)} shapes, {len(rejected)} candidates rejected)")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .bench import harness

    parser = argparse.ArgumentParser(prog="mxfp4", description="Exact MXFP4 W4A4 GEMM: tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, device, and which backend a call takes").set_defaults(fn=_info)
    p = sub.add_parser("check", help="run custom_kernel on the task's shapes against the exact oracle")
    p.add_argument("--all", action="store_true", help="also the benchmark shapes")
    p.set_defaults(fn=_check)
    p = sub.add_parser("bench", help="benchmark providers side by side under the competition timing rule")
    harness.add_arguments(p)
    p.set_defaults(fn=harness.main)
    p = sub.add_parser("tune", help="time and validate kernel configs, write a tuned table")
    p.add_argument("--shapes-set", default="bench", help="named shape set(s), comma-separated (see mxfp4 bench --help)")
    p.add_argument("--shapes", nargs="+", metavar="M,N,K", help="explicit shapes; overrides --shapes-set")
    p.add_argument("--m", metavar="M1,M2", help="only the shapes of the set(s) with these M")
    p.add_argument("--out", default="mxfp4-tuned.json", help="where to write the table (atomically)")
    p.add_argument("--kernel", type=_kernel_list, default="all",
                   help="which kernels' candidates to time, comma-separated: all, or of "
                        f"{', '.join(k for k in _CANDIDATES if k != 'all')} (default: all)")
    p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                   help="processes that compile the candidates before timing (0: compile while timing)")
    p.add_argument("--replace", action="store_true",
                   help="write only this run's shapes (default: merge into the table at --out)")
    p.add_argument("--trials", metavar="CSV", help="also write every candidate's time (or why it was rejected)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(fn=_tune)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
