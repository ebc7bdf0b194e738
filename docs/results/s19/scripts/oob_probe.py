"""One packed int8_fused call whose last K step reaches past the last run of codes (K = 576,
steps of 512), for compute-sanitizer's memcheck; the output checked against the oracle."""
import torch

import mxfp4
from mxfp4 import KernelConfig, Layout, ops, testing

g = torch.Generator().manual_seed(7)
a = torch.randn(7, 576, generator=g).to(torch.bfloat16).cuda()
w = mxfp4.quantize(torch.randn(40, 576, generator=g).to(torch.bfloat16).cuda()).to_layout(Layout.PLAIN)
for cfg in (KernelConfig(16, 16, 1, 4, 1, 16, "int8_fused", packed=True),
            KernelConfig(16, 16, 1, 4, 2, 2, "int8_fused", packed=True)):
    out, _ = ops.gemm_a4w4_debug(a, w, cfg)
    print(cfg.blocks_per_step, "passed" if testing.check_gemm(out, a, w).passed else "FAILED")
