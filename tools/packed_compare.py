"""The packed weight against the int8 one (GPU): for each shape, the config the library takes and
its twin with ``packed`` flipped, timed cold (the bench's timer) beside cuBLAS bf16, each call's
output checked against the exact oracle first.

Usage (on the GPU box, from the repo root):
  PYTHONPATH=src python3 tools/packed_compare.py M,N,K ...
"""
import dataclasses
import sys

import torch

from mxfp4 import Layout, launch, ops, quantize, testing
from mxfp4.bench.timing import ColdTimer


def main(argv):
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=10, max_runs=60, budget_s=0.6)  # noqa: E731
    print(f"{'shape':>16} {'config':>34} {'int8 w':>7} {'packed':>7} {'cublas':>7} exact")
    for spec in argv:
        m, n, k = map(int, spec.split(","))
        cfg = ops.resolve_config(m, n, k, torch.device("cuda"))
        if not cfg.kernel.startswith("int8"):
            print(f"{spec:>16} {cfg.kernel}: not an int8 kernel, skipped")
            continue
        g = torch.Generator().manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
        b = torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()
        w = quantize(b).to_layout(Layout.AITER_SHUFFLED)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        us, exact = {}, True
        for packed in (False, True):
            c = dataclasses.replace(cfg, packed=packed)
            out.fill_(float("nan"))
            launch.launch_a4w4(a, w, out, c)
            exact &= testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
            us[packed] = t(lambda: launch.launch_a4w4(a, w, out, c))
        cublas = t(lambda: a @ b.T)
        tile = (f"{cfg.kernel} {cfg.block_m}x{cfg.block_n} s{cfg.split_k} w{cfg.num_warps} st{cfg.num_stages} "
                f"b{cfg.blocks_per_step}")
        print(f"{spec:>16} {tile:>34} {us[False].mean_us:7.2f} {us[True].mean_us:7.2f} {cublas.mean_us:7.2f} "
              f"{exact}  (std {us[False].std_us:.2f} / {us[True].std_us:.2f})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
