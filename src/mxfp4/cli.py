"""The command line: ``mxfp4 info | check | bench | bench-model | tune | compile | fuzz`` (also ``python -m mxfp4``)."""
from __future__ import annotations

import argparse
import os
import pathlib
import sys


def _info(args) -> int:
    import torch

    from ._version import __version__
    from .device import cuda_supported

    print(f"mxfp4 {__version__}, torch {torch.__version__}")
    if torch.cuda.is_available():
        dev = torch.device("cuda")
        kernels = "yes" if cuda_supported(dev) else "no (Hopper only)"
        print(f"GPU: {torch.cuda.get_device_name()}; CUDA kernels: {kernels}")
    else:
        print("no GPU: every call runs the exact CPU reference")
    return 0


def _check(args) -> int:
    import torch

    from . import task, testing
    from .tensor import Layout, MXFP4Tensor

    device = "cuda" if torch.cuda.is_available() else "cpu"
    failed = 0
    for m, n, k, seed in task.TEST_SHAPES + task.BENCHMARK_SHAPES:
        data = task.generate_input(m, n, k, seed, device)
        w = MXFP4Tensor(data[3], data[4], (n, k), Layout.AITER_SHUFFLED)
        report = testing.check_gemm(task.custom_kernel(data), data[0], w)
        failed += not report.passed
        print(f"{m}x{n}x{k}: {'ok' if report.passed else 'FAILED'} {report}")
    return 1 if failed else 0


class UsageError(ValueError):
    """A command-line argument breaks its rule: the message names it; the exit status is 2."""


def _output_file(option: str, value: str | None) -> pathlib.Path | None:
    """The file ``option`` names, checked before any work: not a directory, and under a directory that
    exists or can be made (the benchmarks would otherwise run to the end and lose their rows)."""
    if value is None:
        return None
    path = pathlib.Path(value)
    if path.is_dir():
        raise UsageError(f"{option} {value!r} is a directory: it must name a file")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {value!r}: {str(parent)!r} is a file, so the file cannot be made under it")
    if not os.access(path if path.exists() else parent, os.W_OK):
        raise UsageError(f"{option} {value!r}: not writable here")
    return path


def _shapes(args):
    from .bench.shapes import parse_shapes, shape_set

    if args.shapes is not None:
        if not args.shapes:
            raise UsageError("--shapes needs at least one m,n,k shape (or leave it out for --set)")
        return parse_shapes(args.shapes)
    return shape_set(args.set)


def _bench(args) -> int:
    from .bench import harness

    record, out = _output_file("--record", args.record), _output_file("--out", args.out)
    _output_file("--plot", args.plot)
    if args.plot is not None:
        if not args.plot.lower().endswith(".png"):
            raise UsageError(f"--plot must name a .png file, got {args.plot!r}")
        try:
            import matplotlib  # noqa: F401 - checked before the benchmark runs, not after
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
    if args.peer is not None:
        if args.host:
            raise UsageError("--peer goes without --host (it times the GEMMs, not the host)")
        from .bench import peers

        try:
            peers.load(args.peer)  # checked before the benchmark runs, not after
        except ImportError as e:
            raise UsageError(str(e)) from None
    if args.host:
        from .bench import host

        text = host.run(_shapes(args) if (args.shapes is not None or args.set != "bench") else None)
    else:
        from .bench.data import DATA_SETS

        rows = []
        data_sets = {"both": ("randn", "model"), "all": DATA_SETS}.get(args.data, (args.data,))
        text = harness.run(_shapes(args), record, data_sets=data_sets, rows=rows, peer=args.peer)
        if args.plot:
            from .bench import plot

            plot.write(rows, pathlib.Path(args.plot), title=text.splitlines()[0])
            print(f"plot: {args.plot}", file=sys.stderr)
    print(text)
    if out is not None:
        out.write_text(text)
    return 0


def _device(name: str | None):
    """The torch device ``--device`` names, checked: cpu or an existing CUDA device."""
    import torch

    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device must be cpu, cuda or cuda:N, got {name!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"--device must be cpu, cuda or cuda:N, got {name!r}")
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise UsageError(f"--device {name}: this machine has no CUDA device (use --device cpu)")
        if dev.index is not None and dev.index >= count:
            raise UsageError(f"--device {name}: this machine has {count} CUDA device(s), cuda:0 .. cuda:{count - 1}")
    return dev


def _bench_model(args) -> int:
    from .bench import llama, model

    for name in ("batch", "prompt", "new_tokens"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    device = _device(args.device)
    record = _output_file("--record", args.record)
    if args.moe and (args.make_checkpoint or args.checkpoint):
        raise UsageError("--moe goes without --make-checkpoint / --checkpoint (the checkpoint bench is the dense model's)")
    if args.moe and args.modes and "compile" in args.modes:
        raise UsageError("--moe --modes compile: the MXFP4 experts' grouped GEMM is not a torch op, so "
                         "torch.compile(fullgraph=True) cannot trace it (eager and graph run)")
    shape = (llama.TINY_MOE if args.tiny else llama.MOE) if args.moe else (llama.TINY if args.tiny else llama.REALISTIC)
    if args.make_checkpoint:
        from .bench import checkpoint

        print(checkpoint.make(shape, args.make_checkpoint, str(device)))
        return 0
    text = model.run(shape, args.batch, args.prompt, args.new_tokens, str(device),
                     record, tuple(args.modes) if args.modes else None,
                     checkpoint=pathlib.Path(args.checkpoint) if args.checkpoint else None)
    print(text)
    return 0


def _tune(args) -> int:
    import torch

    from . import plan
    from .device import cuda_supported
    from .tune import tune

    if not (torch.cuda.is_available() and cuda_supported(torch.device("cuda"))):
        print("mxfp4 tune needs a Hopper GPU", file=sys.stderr)
        return 2
    tune(_shapes(args), _output_file("--table", args.table) or plan.TABLE_PATH)
    return 0


def _compile(args) -> int:
    """Compiles every shipped kernel variant for sm_90a into the disk cache (no GPU needed)."""
    from . import plan
    from .bench.shapes import shape_set
    from .cuda import jit, ops

    variants = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    jit.compile_cubin("quantize.cu", None)  # the plain-layout quantizer (mxfp4.quantize on a GPU)
    for i, p in enumerate(variants):
        for source, defines in ops.builds(p):  # every dtype of A
            jit.compile_cubin(source, defines)
        print(f"[{i + 1}/{len(variants)}] {p}")
    print(f"cubins in {jit.cache_dir()}")
    return 0


def _fuzz(args) -> int:
    from . import fuzz

    if args.cases < 1:
        raise UsageError(f"--cases must be at least 1, got {args.cases}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs} (leave it out for the CPUs less one)")
    if args.case is not None and args.case < 0:
        raise UsageError(f"--case must be a case index >= 0, got {args.case}")
    if args.large_m and args.grouped:
        raise UsageError("--large-m and --grouped draw different cases: give one")
    return fuzz.fuzz(args.cases, args.seed, args.backend, args.case, args.jobs or 0, large_m=args.large_m,
                     grouped=args.grouped)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" where the help does not already say its default and there is one."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _parser():
    from ._version import __version__
    from .bench.data import DATA_SETS
    from .bench.shapes import SHAPE_SETS

    fmt = _Formatter
    parser = argparse.ArgumentParser(prog="mxfp4", description=__doc__)
    parser.add_argument("--version", action="version", version=f"mxfp4 {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, fn, text):
        p = sub.add_parser(name, help=text, description=text, formatter_class=fmt)
        p.set_defaults(fn=fn)
        return p

    command("info", _info, "print the versions, the GPU and which backend a call takes")
    command("check", _check, "run custom_kernel on the task's test and benchmark shapes against the exact oracle "
            "(exit 1 on a failure)")
    for name, fn, text in (
            ("bench", _bench, "time the shapes (custom_kernel, MXFP4Linear) beside cuBLAS bf16 under the competition's "
                              "rule, with host times and exactness; on a machine without a Hopper GPU, the CPU "
                              "reference path by wall clock"),
            ("tune", _tune, "time every kernel candidate per shape and merge the fastest exact one into the table "
                            "(Hopper GPU only)")):
        p = command(name, fn, text)
        p.add_argument("--set", default="bench", help=f"shape set: {', '.join(SHAPE_SETS)}")
        p.add_argument("--shapes", nargs="*", help="m,n,k[,seed] shapes instead of a set")
    b = sub.choices["bench"]
    b.add_argument("--record", help="append the rows to this CSV")
    b.add_argument("--out", help="also write the report (markdown) here")
    b.add_argument("--data", choices=(*DATA_SETS, "both", "all"), default="randn",
                   help="input data (default randn, the task's); model: model-like activations and weights with "
                        "outlier channels; heavy: heavy-tailed (Student-t) activations with per-token scales "
                        "(bench/data.py); both: randn and model; all: the three")
    b.add_argument("--plot", metavar="FILE.png", help="also draw time per shape beside cuBLAS bf16 and the stream "
                   "floor, and the ratio (needs matplotlib)")
    b.add_argument("--peer", choices=("humming",), help="also time a third-party library on the same weights in "
                   "the same run: humming (humming-kernels 0.1.19: W4A8 with fp8 activations and W4A16, GPU only)")
    b.add_argument("--host", action="store_true", help="instead: host (CPU) time per eager call of every entry point "
                   "beside torch.mm and nn.Linear at M = 1, 16, 256, 1024 (N, K of the shapes given, by default "
                   "the task's distinct N x K)")
    sub.choices["tune"].add_argument("--table", help="table to merge into (default: the shipped one)")
    p = command("bench-model", _bench_model, "greedy generation of a Llama-style decoder: bf16 against MXFP4 eager, "
                "torch.compile and CUDA graph, decode tokens/s, memory and exactness")
    p.add_argument("--tiny", action="store_true", help="the test-sized model (hidden 128, 2 layers) instead of "
                   "hidden 4096, 8 layers, intermediate 14336")
    p.add_argument("--moe", action="store_true", help="a mixture-of-experts decoder instead: hidden 2048, 8 layers, "
                   "64 experts of 1408 (top 6), bf16 experts on torch._grouped_mm against MXFP4Experts (with --tiny: "
                   "hidden 128, 8 experts)")
    p.add_argument("--batch", type=int, default=1, help="sequences generated together")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens (prefill, not timed)")
    p.add_argument("--new-tokens", type=int, default=128, help="tokens generated (decode steps timed)")
    p.add_argument("--modes", nargs="*", choices=("eager", "compile", "graph"),
                   help="default: all the device has (graph on CUDA only)")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    p.add_argument("--record", help="append the rows to this CSV")
    p.add_argument("--make-checkpoint", metavar="DIR", help="write the model (quantized in memory) as a Quark "
                   "MXFP4 checkpoint in DIR and stop")
    p.add_argument("--checkpoint", metavar="DIR", help="the MXFP4 model only, built on meta and loaded from DIR "
                   "(written by --make-checkpoint)")
    command("compile", _compile, "compile every shipped kernel variant for sm_90a into the cubin cache "
            "($MXFP4_CACHE_DIR; no GPU needed)")
    from .fuzz import add_arguments

    p = command("fuzz", _fuzz, "seeded cases over the whole input range through every entry point, against an "
                "exact oracle; prints a reproducer per failure, exit 1 on failure")
    add_arguments(p)
    for action in p._actions:  # the fuzzer's own options without a help line get one (and their defaults)
        if action.help is None:
            action.help = {"seed": "seed of the case stream (case i of seed S is the same everywhere)",
                           "backend": "auto: the kernels where a Hopper GPU runs them, else the reference"
                           }.get(action.dest)
    p.set_defaults(jobs=None)  # None: the CPUs less one, at most 16 (an explicit value must be >= 1)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as e:  # UsageError, and a bad value found deeper (a shape, a batch size)
        print(f"mxfp4 {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
