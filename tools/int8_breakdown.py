"""Where the int8 path's time goes (GPU): the A fold launch alone, the int8 GEMM launch alone
(on A folded beforehand) and the whole call, cold L2 (the bench's timer), beside cuBLAS bf16;
for GROUP_M variants. Each variant's output is checked against the exact oracle first.

Usage (on the GPU box, from the repo root):  PYTHONPATH=src python3 tools/int8_breakdown.py M,N,K ...
"""
import sys

import torch

from mxfp4 import Layout, launch, ops, quantize, testing
from mxfp4.bench.timing import ColdTimer


def main(argv):
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=5, max_runs=30, budget_s=0.5).mean_us  # noqa: E731
    print(f"{'shape':>16} {'group_m':>7} {'fold_a':>8} {'gemm':>8} {'call':>8} {'cublas':>8} exact")
    for spec in argv:
        m, n, k = map(int, spec.split(","))
        g = torch.Generator().manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
        b = torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()
        w = quantize(b).to_layout(Layout.AITER_SHUFFLED)
        cfg = ops.resolve_config(m, n, k, a.device)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        seg = cfg.fold_blocks or k // 32
        fold_us = t(lambda: launch.fold_a(a, seg, w.scale_rule))
        folded = launch.fold_a(a, seg, w.scale_rule)
        real_fold = launch.fold_a
        cublas = t(lambda: a @ b.T)
        for group in (4, 8, 16):
            launch.GROUP_M = group
            launch.launch_a4w4(a, w, out, cfg)
            exact = testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
            call = t(lambda: launch.launch_a4w4(a, w, out, cfg))
            launch.fold_a = lambda *args: folded  # the GEMM launch alone
            gemm = t(lambda: launch.launch_a4w4(a, w, out, cfg))
            launch.fold_a = real_fold
            print(f"{spec:>16} {group:>7} {fold_us:8.1f} {gemm:8.1f} {call:8.1f} {cublas:8.1f} {exact}", flush=True)
        launch.GROUP_M = 8
    print("config:", cfg)


if __name__ == "__main__":
    main(sys.argv[1:])
