"""Where the int8 paths' time goes (GPU), cold L2 (the bench's timer), beside cuBLAS bf16: the
A fold launch alone, the int8 GEMM launch alone (on A folded beforehand), the two-launch call,
and the one-launch persistent kernel (int8_meet), all on the same tile config. Each call's
output is checked against the exact oracle first.

Usage (on the GPU box, from the repo root):
  PYTHONPATH=src python3 tools/int8_breakdown.py M,N,K[,BM,BN,SPLIT,WARPS,STAGES,STEP] ...
(without the tile fields: the table's or heuristic's config for the shape, as kernel int8).
"""
import dataclasses
import sys

import torch

from mxfp4 import KernelConfig, Layout, launch, ops, quantize, testing
from mxfp4.bench.timing import ColdTimer


def main(argv):
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=5, max_runs=30, budget_s=0.5).mean_us  # noqa: E731
    print(f"{'shape':>16} {'tile':>22} {'fold_a':>7} {'gemm':>7} {'2 launch':>8} {'meet':>7} "
          f"{'cublas':>7} exact")
    for spec in argv:
        fields = list(map(int, spec.split(",")))
        m, n, k = fields[:3]
        if len(fields) > 3:
            cfg = KernelConfig(*fields[3:9], kernel="int8")
        else:
            cfg = dataclasses.replace(ops.resolve_config(m, n, k, torch.device("cuda")), kernel="int8")
        g = torch.Generator().manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
        b = torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()
        w = quantize(b).to_layout(Layout.AITER_SHUFFLED)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        seg = launch._segment_blocks(k, cfg)
        fold_us = t(lambda: launch.fold_a(a, seg, w.scale_rule))
        folded = launch.fold_a(a, seg, w.scale_rule)
        real_fold = launch.fold_a
        calls = {"two": lambda: launch.launch_int8(a, w, out, cfg),
                 "meet": lambda: launch.launch_int8_meet(a, w, out, cfg)}
        exact = True
        for fn in calls.values():
            out.fill_(float("nan"))
            fn()
            exact &= testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
        us = {name: t(fn) for name, fn in calls.items()}
        launch.fold_a = lambda *args: folded  # the GEMM launch alone
        gemm = t(calls["two"])
        launch.fold_a = real_fold
        cublas = t(lambda: a @ b.T)
        tile = f"{cfg.block_m}x{cfg.block_n} s{cfg.split_k} w{cfg.num_warps} st{cfg.num_stages} b{cfg.blocks_per_step}"
        print(f"{m},{n},{k:>5} {tile:>22} {fold_us:7.1f} {gemm:7.1f} {us['two']:8.1f} {us['meet']:7.1f} "
              f"{cublas:7.1f} {exact}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
