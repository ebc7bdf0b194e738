"""Device-side probe: where the time of one launch goes, phase by phase, beside cuBLAS bf16.

Times the full kernel, phase 1 alone (quantize A + meeting point), phase 2 alone (GEMM on an
already quantized A) and neither (launch + exit protocol), for a few configs per benchmark shape.
Usage (on the GPU machine): PYTHONPATH=src python3 tools/probe.py
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from mxfp4 import KernelConfig as KC  # noqa: E402
from mxfp4 import launch, task, testing  # noqa: E402
from mxfp4.bench.providers import build_stream_floor  # noqa: E402
from mxfp4.bench.timing import ColdTimer, geomean  # noqa: E402
from mxfp4.kernels.a4w4 import a4w4_kernel  # noqa: E402

CONFIGS = {
    (4, 2880, 512): [KC(16, 128, 4), KC(16, 64, 2), KC(16, 32, 1), KC(16, 64, 1)],
    (16, 2112, 7168): [KC(16, 256, 12), KC(16, 128, 8), KC(16, 64, 4)],
    (32, 4096, 512): [KC(32, 128, 4), KC(32, 64, 2), KC(32, 32, 1)],
    (32, 2880, 512): [KC(32, 64, 2), KC(32, 128, 4), KC(32, 32, 1)],
    (64, 7168, 2048): [KC(64, 256, 4, 8), KC(64, 128, 2, 8), KC(64, 64, 1, 4)],
    (256, 3072, 1536): [KC(64, 256, 2, 8), KC(128, 128, 2, 8), KC(64, 128, 1, 8)],
}


def main() -> None:
    timer = ColdTimer("cuda")
    best = []
    print("shape            config            full   ph1   ph2  none  bf16 stream  pass")
    for m, n, k, seed in task.BENCHMARK_SHAPES:
        data = task.generate_input(m, n, k, seed, device="cuda")
        a, b = data[0], data[1]
        w = task.weight_from_task(data[3], data[4], k)
        t_bf16 = timer.time(lambda: a @ b.T).mean_us
        stream = build_stream_floor(data, torch.device("cuda"), timer)
        t_stream = timer.time(stream.fn).mean_us if stream.available else float("nan")
        shape_best = None
        for cfg in CONFIGS[(m, n, k)]:
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            grid, args, consts = launch.plan_a4w4(a, w, out, cfg)
            a4w4_kernel[grid](*args, **consts)
            torch.cuda.synchronize()
            ok = testing.check_gemm(out, a, w).passed
            times = []
            for phases in (3, 1, 2, 0):
                times.append(timer.time(lambda: a4w4_kernel[grid](*args, **consts, PHASES=phases)).mean_us)
            print(f"{m}x{n}x{k:<6d} bm{cfg.block_m} bn{cfg.block_n} sk{cfg.split_k} w{cfg.num_warps}"
                  f"  {times[0]:5.1f} {times[1]:5.1f} {times[2]:5.1f} {times[3]:5.1f} {t_bf16:5.1f} {t_stream:5.1f}"
                  f"  {ok}", flush=True)
            if ok and (shape_best is None or times[0] < shape_best):
                shape_best = times[0]
        best.append((shape_best, t_bf16))
    print(f"geomean best full: {geomean([b for b, _ in best]):.2f} us, cuBLAS bf16 {geomean([c for _, c in best]):.2f} us")


if __name__ == "__main__":
    main()
