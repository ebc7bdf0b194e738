"""Run the library's kernel on one shape a few times, for a profiler (ncu) to catch one launch.

Usage: python tools/profile_one.py M N K [KERNEL BM BN SPLIT WARPS STAGES BLOCKS_PER_STEP]
(default: the config the library picks for the shape)
"""
import sys

import torch

sys.path.insert(0, "src")
import mxfp4  # noqa: E402
from mxfp4 import KernelConfig, ops  # noqa: E402

m, n, k = map(int, sys.argv[1:4])
a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
w = mxfp4.quantize(torch.randn(n, k, device="cuda").to(torch.bfloat16)).to_layout(mxfp4.Layout.AITER_SHUFFLED)
if len(sys.argv) > 4:
    kernel, *fields = sys.argv[4:]
    cfg = KernelConfig(*map(int, fields), kernel=kernel)
else:
    cfg = ops.resolve_config(m, n, k, a.device)
print(m, n, k, cfg, flush=True)
for _ in range(3):
    mxfp4.gemm_a4w4(a, w, config=cfg)
torch.cuda.synchronize()
