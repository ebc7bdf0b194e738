"""Scratch A/B timer (not committed): times the table's config per shape, cold, prints one line per shape."""
import sys, torch
from mxfp4 import launch, ops, task, testing
from mxfp4.bench.timing import ColdTimer
timer = ColdTimer("cuda")
tag = sys.argv[1]
for spec in sys.argv[2:]:
    m, n, k = map(int, spec.split(","))
    data = task.generate_input(m, n, k, m + n + k, device="cuda")
    a, b = data[0], data[1]
    w = task.weight_from_task(data[3], data[4], k)
    cfg = ops.resolve_config(m, n, k, torch.device("cuda"))
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    call = lambda: launch.launch_a4w4(a, w, out, cfg)
    out.fill_(float("nan")); call(); torch.cuda.synchronize()
    ok = testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
    us = timer.time(call, min_runs=10, max_runs=60, budget_s=0.4).mean_us
    cb = timer.time(lambda: a @ b.T, min_runs=10, max_runs=40, budget_s=0.3).mean_us
    print(f"{tag} {spec} {cfg.kernel} {us:.2f} {cb:.2f} {ok}", flush=True)
