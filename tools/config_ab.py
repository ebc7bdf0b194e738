"""Several configs of one shape timed side by side (GPU): each config's call, L2 flushed before
every call (the bench's rule), the configs taken in turn and the round repeated twice, beside
cuBLAS bf16 in the same run; every output checked against the exact oracle.

Usage (on the GPU box, from the repo root):
  PYTHONPATH=src python3 tools/config_ab.py 'M,N,K;CONFIG;CONFIG...' ...
CONFIG: "table" (the shipped table's pick) or BM,BN,SPLIT,WARPS,STAGES,STEP,KERNEL[,tma|,packed] (tma:
the int8_fused weight through TMA, KernelConfig.w_tma; packed: the weight at MXFP4 size,
KernelConfig.packed), e.g.
  tools/config_ab.py '256,3072,1536;table;128,64,1,8,3,8,int8_meet'
A NAME=V argument holds mxfp4.launch.NAME = V for the whole run (as tools/knob_ab.py does).
Prints one line per config (mean and the two rounds, registers and spills of the variant it
compiled, or "cached"), then per config position the geometric mean over the shapes.
"""
from __future__ import annotations

import statistics
import sys

import torch

from mxfp4 import KernelConfig, launch, ops, task, testing
from mxfp4.bench.timing import ColdTimer, geomean

from knob_ab import compiled_variants, config_from_fields, config_tag, hold_knobs


def parse(spec: str, m: int, n: int, k: int) -> KernelConfig:
    if spec == "table":
        return ops.resolve_config(m, n, k, torch.device("cuda"))
    return config_from_fields(spec.split(","), " or 'table'")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    argv = hold_knobs(argv)  # NAME=V: a knob of mxfp4.launch held for the whole run
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=10, max_runs=40, budget_s=0.4).mean_us  # noqa: E731
    columns: dict[int, list[float]] = {}
    cublas_all = []
    for arg in argv:
        shape, *specs = arg.split(";")
        m, n, k = map(int, shape.split(","))
        data = task.generate_input(m, n, k, m + n + k, device="cuda")
        a, b = data[0], data[1]
        w = task.weight_from_task(data[3], data[4], k)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        configs = [parse(s, m, n, k) for s in specs]
        calls, notes = [], []
        for cfg in configs:
            call = (lambda c: lambda: launch.launch_a4w4(a, w, out, c))(cfg)
            out.fill_(float("nan"))
            before = compiled_variants(cfg.kernel)
            try:
                call()
            except Exception as err:  # a config this shape cannot take: say so, keep going
                calls.append(None)
                notes.append(f"failed: {type(err).__name__}: {str(err)[:80]}")
                continue
            exact = testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
            new = compiled_variants(cfg.kernel)[len(before):]
            calls.append(call)
            notes.append(f"exact {exact} regs " + (f"{new[-1].n_regs}+{new[-1].n_spills}sp" if new else "cached"))
        times: list[list[float]] = [[] for _ in configs]
        for _ in range(2):
            for i, call in enumerate(calls):
                if call is not None:
                    times[i].append(t(call))
        cublas = t(lambda: a @ b.T)
        cublas_all.append(cublas)
        print(f"{m}x{n}x{k}  cuBLAS bf16 {cublas:.2f} us", flush=True)
        for i, (cfg, spec) in enumerate(zip(configs, specs)):
            tag = ("table " if spec == "table" else "") + config_tag(cfg)
            if times[i]:
                mean = statistics.mean(times[i])
                columns.setdefault(i, []).append(mean)
                cell = f"{mean:6.2f} ({'/'.join(f'{x:.2f}' for x in times[i])}) x bf16 {mean / cublas:.2f}"
            else:
                cell = "   -"
            print(f"  [{i}] {tag:>40} {cell:>34}  {notes[i]}", flush=True)
    for i, col in sorted(columns.items()):
        if len(col) == len(argv):
            print(f"geomean config [{i}] over {len(col)} shapes: {geomean(col):.2f} us "
                  f"(cuBLAS bf16 {geomean(cublas_all):.2f})")


if __name__ == "__main__":
    main(sys.argv[1:])
