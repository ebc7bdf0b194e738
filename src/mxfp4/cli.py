"""The command line: ``mxfp4 info | check | bench | bench-model | tune | compile | fuzz`` (also ``python -m mxfp4``)."""
from __future__ import annotations

import argparse
import pathlib
import sys


def _info(args) -> int:
    import torch

    from . import __version__, ops

    print(f"mxfp4 {__version__}, torch {torch.__version__}")
    if torch.cuda.is_available():
        dev = torch.device("cuda")
        print(f"GPU: {torch.cuda.get_device_name()}; CUDA kernels: {'yes' if ops.cuda_supported(dev) else 'no (Hopper only)'}")
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


def _shapes(args):
    from .bench.shapes import parse_shapes, shape_set

    return parse_shapes(args.shapes) if args.shapes else shape_set(args.set)


def _bench(args) -> int:
    from .bench import harness

    data_sets = ("randn", "model") if args.data == "both" else (args.data,)
    text = harness.run(_shapes(args), pathlib.Path(args.record) if args.record else None, data_sets=data_sets)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)
    return 0


def _bench_model(args) -> int:
    import torch

    from .bench import llama, model

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    shape = llama.TINY if args.tiny else llama.REALISTIC
    if args.make_checkpoint:
        from .bench import checkpoint

        print(checkpoint.make(shape, args.make_checkpoint, device))
        return 0
    text = model.run(shape, args.batch, args.prompt, args.new_tokens, device,
                     pathlib.Path(args.record) if args.record else None, tuple(args.modes) if args.modes else None,
                     checkpoint=pathlib.Path(args.checkpoint) if args.checkpoint else None)
    print(text)
    return 0


def _tune(args) -> int:
    import torch

    from . import ops, plan
    from .tune import tune

    if not (torch.cuda.is_available() and ops.cuda_supported(torch.device("cuda"))):
        print("mxfp4 tune needs a Hopper GPU", file=sys.stderr)
        return 2
    tune(_shapes(args), pathlib.Path(args.table) if args.table else plan.TABLE_PATH)
    return 0


def _compile(args) -> int:
    """Compiles every shipped kernel variant for sm_90a into the disk cache (no GPU needed)."""
    from . import plan
    from .bench.shapes import shape_set
    from .cuda import jit

    variants = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    jit.compile_cubin("quantize.cu")
    for i, p in enumerate(variants):
        jit.compile_cubin(p.source, p.defines())
        print(f"[{i + 1}/{len(variants)}] {p}")
    print(f"cubins in {jit.cache_dir()}")
    return 0


def _fuzz(args) -> int:
    from . import fuzz

    return fuzz.fuzz(args.cases, args.seed, args.backend, args.case, args.jobs, large_m=args.large_m)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mxfp4", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, GPU and backend").set_defaults(fn=_info)
    sub.add_parser("check", help="custom_kernel on the task's shapes against the exact oracle").set_defaults(fn=_check)
    for name, fn, helptext in (("bench", _bench, "time the task's shapes beside cuBLAS bf16"),
                               ("tune", _tune, "tune kernel parameters per shape into the table")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--set", default="bench", help="shape set (bench, test, deepseek, gptoss, large, all)")
        p.add_argument("--shapes", nargs="*", help="m,n,k[,seed] shapes instead of a set")
        p.set_defaults(fn=fn)
    sub.choices["bench"].add_argument("--record", help="append the rows to this CSV")
    sub.choices["bench"].add_argument("--out", help="also write the report (markdown) here")
    sub.choices["bench"].add_argument("--data", choices=("randn", "model", "both"), default="randn",
                                      help="input data (default randn, the task's): model = model-like "
                                           "activations and weights with outliers (bench/data.py)")
    sub.choices["tune"].add_argument("--table", help="table to merge into (default: the shipped one)")
    p = sub.add_parser("bench-model", help="greedy generation of a Llama-style decoder: bf16 against MXFP4")
    p.add_argument("--tiny", action="store_true", help="the test-sized model (hidden 128, 2 layers) instead of "
                   "hidden 4096, 8 layers, intermediate 14336")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens (prefill, not timed)")
    p.add_argument("--new-tokens", type=int, default=128, help="tokens generated (decode steps timed)")
    p.add_argument("--modes", nargs="*", choices=("eager", "compile", "graph"), help="default: all the device has")
    p.add_argument("--device", help="default: cuda if present, else cpu")
    p.add_argument("--record", help="append the rows to this CSV")
    p.add_argument("--make-checkpoint", metavar="DIR", help="write the model (quantized in memory) as a Quark "
                   "MXFP4 checkpoint in DIR and stop")
    p.add_argument("--checkpoint", metavar="DIR", help="the MXFP4 model only, built on meta and loaded from DIR "
                   "(written by --make-checkpoint)")
    p.set_defaults(fn=_bench_model)
    sub.add_parser("compile", help="compile every shipped kernel variant (sm_90a, no GPU needed)").set_defaults(
        fn=_compile)
    from .fuzz import add_arguments

    add_arguments(sub.add_parser("fuzz", help="seeded cases over the whole input range against an exact oracle"))
    sub.choices["fuzz"].set_defaults(fn=_fuzz)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as e:
        print(f"mxfp4 {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
