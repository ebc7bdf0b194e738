"""Compile the kernel for a few configs and save its IR/PTX with register and spill counts.

Usage (GPU machine): PYTHONPATH=src python3 tools/dump_asm.py OUTDIR
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from mxfp4 import KernelConfig as KC  # noqa: E402
from mxfp4 import launch, task  # noqa: E402
from mxfp4.kernels.a4w4 import a4w4_kernel  # noqa: E402

out_dir = sys.argv[1]
for (m, n, k), cfg in (((16, 2112, 7168), KC(16, 256, 12)), ((64, 7168, 2048), KC(64, 256, 4, 8))):
    data = task.generate_input(m, n, k, 1, device="cuda")
    w = task.weight_from_task(data[3], data[4], k)
    out = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    grid, args, consts = launch.plan_a4w4(data[0], w, out, cfg)
    ck = a4w4_kernel[grid](*args, **consts)
    tag = f"bm{cfg.block_m}_bn{cfg.block_n}"
    print(tag, "regs", ck.n_regs, "spills", ck.n_spills, "shared", ck.metadata.shared)
    for key in ("ttgir", "ptx"):
        with open(os.path.join(out_dir, f"{tag}.{key}"), "w") as f:
            f.write(ck.asm[key])
    if "sass" in ck.asm:
        with open(os.path.join(out_dir, f"{tag}.sass"), "w") as f:
            f.write(ck.asm["sass"])
