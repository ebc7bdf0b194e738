"""Device-side sweep: check and time kernel configs on the task shapes, beside cuBLAS bf16.

Usage (on the GPU machine): python3 tools/sweep.py [--quick] [--out DIR]
Prints one line per (shape, config) and a summary table last; writes sweep.json under --out.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from mxfp4 import KernelConfig, ops, task, testing  # noqa: E402
from mxfp4.bench.timing import ColdTimer, geomean  # noqa: E402


def candidates(m: int, n: int, k: int, quick: bool) -> list[KernelConfig]:
    bm_opts = [min(64, max(16, 1 << math.ceil(math.log2(m))))]
    if m >= 128:
        bm_opts = [64, 128]
    out = []
    for bm, bn, warps in itertools.product(bm_opts, (64, 128, 256), (4, 8)):
        if bm * bn > 128 * 256 or (warps == 8 and bm * bn < 32 * 128):
            continue
        tiles = -(-m // bm) * -(-n // bn)
        for split in (1, 2, 3, 4, 6, 8, 12, 16):
            work = tiles * split
            if split > k // 128 or work > 2 * 132 or (work < 48 and split < 16):
                continue
            out.append(KernelConfig(bm, bn, split, warps, 3))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--kinds", default="bench,test")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timing per config")
    args = p.parse_args()
    dev = torch.device("cuda")
    timer = ColdTimer(dev)
    results = []
    summary = []
    t_start = time.time()
    for kind, shapes in (("bench", task.BENCHMARK_SHAPES), ("test", task.TEST_SHAPES)):
        if kind not in args.kinds.split(","):
            continue
        for m, n, k, seed in shapes:
            data = task.generate_input(m, n, k, seed, device=dev)
            a, b = data[0], data[1]
            w = task.weight_from_task(data[3], data[4], k)
            t_bf16 = timer.time(lambda: a @ b.T, budget_s=args.budget).mean_us
            best = None
            for cfg in candidates(m, n, k, args.quick):
                try:
                    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev)
                    ops.launch_a4w4(a, w, out, cfg)
                    torch.cuda.synchronize()
                    rep = testing.check_gemm(out, a, w)
                    t = timer.time(lambda: ops.gemm_a4w4(a, w, config=cfg), budget_s=args.budget)
                except Exception as exc:  # report and keep sweeping
                    print(f"{m}x{n}x{k} {cfg} FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                    continue
                row = dict(kind=kind, m=m, n=n, k=k, cfg=cfg.to_dict(), us=t.mean_us, std=t.std_us,
                           passed=rep.passed, ident=rep.identical_fraction, viol=rep.violations,
                           bf16_us=t_bf16)
                results.append(row)
                print(f"{m}x{n}x{k} bm{cfg.block_m} bn{cfg.block_n} sk{cfg.split_k} w{cfg.num_warps} "
                      f"st{cfg.num_stages}: {t.mean_us:7.2f} us  pass={rep.passed} ident={rep.identical_fraction:.5f}",
                      flush=True)
                if rep.passed and (best is None or t.mean_us < best["us"]):
                    best = row
            summary.append((kind, m, n, k, t_bf16, best))
            print(f"-- elapsed {time.time() - t_start:.0f}s", flush=True)
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("\nkind  m     n     k     bf16_us  ours_us  ratio  best config")
    ours = []
    for kind, m, n, k, tb, best in summary:
        if best is None:
            print(f"{kind:5s} {m:<5d} {n:<5d} {k:<5d} {tb:7.2f}  none passed")
            continue
        c = best["cfg"]
        if kind == "bench":
            ours.append(best["us"])
        print(f"{kind:5s} {m:<5d} {n:<5d} {k:<5d} {tb:7.2f}  {best['us']:7.2f}  {best['us'] / tb:5.2f}  "
              f"bm{c['block_m']} bn{c['block_n']} sk{c['split_k']} w{c['num_warps']} st{c['num_stages']}")
    print(f"geomean of bench shapes (ours): {geomean(ours):.2f} us")
    table = {"format": 1, "gpu": torch.cuda.get_device_name(), "triton": __import__("triton").__version__,
             "entries": [dict(m=m, n=n, k=k, config=best["cfg"], us=round(best["us"], 3),
                              bf16_us=round(tb, 3)) for _, m, n, k, tb, best in summary if best]}
    with open(os.path.join(args.out, "tuned.json"), "w") as f:
        json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
