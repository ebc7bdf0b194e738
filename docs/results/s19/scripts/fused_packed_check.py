"""test_fused_on_gpu's shapes and checks for its two packed configs only (the session's change)."""
import sys

import torch

sys.path.insert(0, "tests")
import mxfp4  # noqa: E402
from mxfp4 import KernelConfig, Layout, fold, ops, testing  # noqa: E402
from test_int8 import spread_rows  # noqa: E402

bad = 0
for m in (1, 7, 16, 100, 333):
    for n, k in ((2880, 512), (2112, 7168), (3072, 1536), (2152, 2048)):
        g = torch.Generator().manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
        a[::7] = spread_rows(a[::7], -9, 9, 8)
        w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda())
        w = w.to_layout(Layout.AITER_SHUFFLED if n % 16 == 0 else Layout.PLAIN)
        for cfg in (KernelConfig(16, 128, 12, 8, 3, 4, "int8_fused", packed=True),
                    KernelConfig(16, 32, 1, 4, 1, 16, "int8_fused", packed=True)):
            out, folded_a = ops.gemm_a4w4_debug(a, w, cfg)
            ok = not fold.differing_arrays(folded_a, fold.fold_tensor(mxfp4.quantize(a), folded_a.seg_blocks))
            ok = ok and testing.check_gemm(out, a, w).passed
            bad += not ok
            if not ok:
                print("FAIL", m, n, k, cfg)
print("fused packed checks:", 40 - bad, "passed,", bad, "failed")
