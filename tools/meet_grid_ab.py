"""int8_meet with at most one program per SM against at most two (launch.MEET_PER_SM; two only
where the driver says two of the compiled kernel fit on an SM and there are more work items than
SMs), on the same config, alternated twice (GPU; L2 flushed before each call, beside cuBLAS bf16).

Usage: PYTHONPATH=src python3 tools/meet_grid_ab.py M,N,K,BM,BN,STAGES,STEP [...]
(Run 14 of the ninth session measured this before the launcher asked the driver: the tool then
capped the grid at one or two programs per SM itself, on configs checked offline to fit two.)
"""
import sys

import torch

from mxfp4 import KernelConfig, launch, task, testing
from mxfp4.bench.timing import ColdTimer


def main(argv):
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=10, max_runs=40, budget_s=0.4).mean_us  # noqa: E731
    default = launch.MEET_PER_SM
    for spec in argv:
        m, n, k, bm, bn, stages, step = map(int, spec.split(","))
        cfg = KernelConfig(bm, bn, 1, 4, stages, step, "int8_meet")
        data = task.generate_input(m, n, k, m + n + k, device="cuda")
        a, b = data[0], data[1]
        w = task.weight_from_task(data[3], data[4], k)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        call = lambda: launch.launch_a4w4(a, w, out, cfg)  # noqa: E731
        res = {}
        for per_sm in (1, 2, 1, 2):
            launch.MEET_PER_SM = per_sm
            out.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            exact = testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
            res.setdefault(per_sm, []).append((t(call), exact))
        launch.MEET_PER_SM = default
        cublas = t(lambda: a @ b.T)
        cells = "  ".join(f"{p}/SM {sum(x for x, _ in v) / len(v):6.2f} exact {all(e for _, e in v)}"
                          for p, v in res.items())
        print(f"{m}x{n}x{k} {bm}x{bn} st{stages} b{step}: {cells}  cuBLAS bf16 {cublas:6.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
