"""A / B of one module-level knob of mxfp4.launch (GPU): each shape's call (the table's config,
or one given with the shape) timed with the knob at value A and at value B, alternated twice
(A B A B, L2 flushed before each call, the bench's rule), beside cuBLAS bf16; every output
checked against the exact oracle.

Usage (on the GPU box, from the repo root):
  PYTHONPATH=src python3 tools/knob_ab.py NAME A B SHAPE [SHAPE ...] [OTHER=V ...]
SHAPE: M,N,K (the table's config) or M,N,K,BM,BN,SPLIT,WARPS,STAGES,STEP,KERNEL[,tma|,packed]. E.g.
  tools/knob_ab.py WIDE_FACTS 0 8192 16,2112,7168
  tools/knob_ab.py MEET_PER_SM 1 2 256,3072,1536,64,64,1,4,3,8,int8_meet
(OTHER=V: another knob held at V for the whole run). Per shape and value, the registers per
thread (and spilled bytes) of the kernel variant that the first call compiled ("cached" when it
had been compiled before in this process, so the variant is not known).
"""
from __future__ import annotations

import importlib
import statistics
import sys

import torch

from mxfp4 import KernelConfig, launch, ops, task, testing
from mxfp4.bench.timing import ColdTimer, geomean


KERNEL_OBJECTS = {"int8_fused": ("fused", "a4w4_fused_kernel"), "int8_meet": ("meet", "a4w4_meet_kernel"),
                  "int8": ("int8", "a4w4_int8_kernel")}


def config_from_fields(fields: list[str], alternatives: str = "") -> KernelConfig:
    """The KernelConfig of BM,BN,SPLIT,WARPS,STAGES,STEP,KERNEL[,tma|,packed] (tma: ``w_tma``;
    packed: ``packed``), split; ``alternatives`` ends the message that refuses anything else."""
    if len(fields) not in (7, 8) or fields[7:] not in ([], ["tma"], ["packed"]):
        raise SystemExit(f"config {','.join(fields)!r}: want BM,BN,SPLIT,WARPS,STAGES,STEP,KERNEL[,tma|,packed]"
                         f"{alternatives}")
    return KernelConfig(*map(int, fields[:6]), kernel=fields[6], w_tma=fields[7:] == ["tma"],
                        packed=fields[7:] == ["packed"])


def config_tag(cfg: KernelConfig) -> str:
    """A config in one short line: kernel, tile, split, warps, stages, K step, and tma."""
    return (f"{cfg.kernel} {cfg.block_m}x{cfg.block_n} s{cfg.split_k} w{cfg.num_warps} st{cfg.num_stages} "
            f"b{cfg.blocks_per_step}{' tma' if cfg.w_tma else ''}{' packed' if cfg.packed else ''}")


def compiled_variants(kernel_name):
    """The compiled variants of a kernel so far, in compile order (empty for an unknown kernel)."""
    if kernel_name not in KERNEL_OBJECTS:
        return []
    module, name = KERNEL_OBJECTS[kernel_name]
    fn = getattr(importlib.import_module(f"mxfp4.kernels.{module}"), name)
    return [ck for cache in fn.device_caches.values() for ck in cache[0].values()]


def hold_knobs(args: list[str]) -> list[str]:
    """Set each NAME=V of ``args`` as mxfp4.launch.NAME = int(V) (NAME must be a knob there);
    returns the other arguments."""
    for held in (a for a in args if "=" in a):
        key, value = held.split("=")
        if not hasattr(launch, key):
            raise SystemExit(f"mxfp4.launch has no knob {key!r}")
        setattr(launch, key, int(value))
        print(f"held: {key} = {value}")
    return [a for a in args if "=" not in a]


def main(argv):
    name, values = argv[0], [int(v) for v in argv[1:3]]
    shapes = hold_knobs(argv[3:])
    if not hasattr(launch, name):
        raise SystemExit(f"mxfp4.launch has no knob {name!r}")
    original = getattr(launch, name)
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=10, max_runs=40, budget_s=0.4).mean_us  # noqa: E731
    rows = []
    print(f"{'shape':>18} {'config':>28} {name + '=' + str(values[0]):>16} {name + '=' + str(values[1]):>16} "
          f"{'cublas':>7} exact")
    for spec in shapes:
        fields = spec.split(",")
        m, n, k = map(int, fields[:3])
        data = task.generate_input(m, n, k, m + n + k, device="cuda")
        a, b = data[0], data[1]
        w = task.weight_from_task(data[3], data[4], k)
        if len(fields) > 3:
            cfg = config_from_fields(fields[3:])
        else:
            cfg = ops.resolve_config(m, n, k, torch.device("cuda"))
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        call = lambda: launch.launch_a4w4(a, w, out, cfg)  # noqa: E731
        times = {v: [] for v in values}
        exact = True
        regs = []
        try:
            for v in values:
                setattr(launch, name, v)
                out.fill_(float("nan"))
                before = compiled_variants(cfg.kernel)
                call()
                exact &= testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
                new = compiled_variants(cfg.kernel)[len(before):]
                regs.append(f"{new[-1].n_regs}+{new[-1].n_spills}sp" if new else "cached")
            for _ in range(2):
                for v in values:
                    setattr(launch, name, v)
                    times[v].append(t(call))
        finally:
            setattr(launch, name, original)
        cublas = t(lambda: a @ b.T)
        tag = config_tag(cfg)
        cells = [f"{statistics.mean(times[v]):6.2f} ({'/'.join(f'{x:.2f}' for x in times[v])})" for v in values]
        print(f"{m:>5}x{n}x{k:<5} {tag:>28} {cells[0]:>16} {cells[1]:>16} {cublas:7.2f} {exact} "
              f"regs {regs[0]} / {regs[1]}", flush=True)
        rows.append((statistics.mean(times[values[0]]), statistics.mean(times[values[1]]), cublas))
    if rows:
        print(f"geomean over {len(rows)}: {name}={values[0]} {geomean([r[0] for r in rows]):.2f} us, "
              f"{name}={values[1]} {geomean([r[1] for r in rows]):.2f} us, cuBLAS bf16 "
              f"{geomean([r[2] for r in rows]):.2f} us")


if __name__ == "__main__":
    main(sys.argv[1:])
