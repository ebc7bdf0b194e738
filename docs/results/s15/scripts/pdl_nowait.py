"""Power check of tests/test_pdl_gpu.py's back-to-back test (GPU, not part of the library): the
multiply launched as a programmatic dependent but WITHOUT its in-kernel wait (PDL=False in the
kernel, launch_pdl=True at the launch). Counts calls whose output differs from the plain path;
a nonzero count says the test's check can see a missing wait."""
import sys

import torch

sys.path.insert(0, "tests")
from mxfp4 import launch  # noqa: E402
from mxfp4.kernels.int8 import a4w4_int8_kernel  # noqa: E402
from test_pdl import CASES, _call, _operands  # noqa: E402


def no_wait(a2, w, out2, config):
    m, k = a2.shape
    seg, _, mode = launch._int8_shape(k, config)
    fw = launch.folded_weight(w, seg, config.packed)
    fa = launch.fold_a(a2, seg, w.scale_rule, 1)
    args, consts, items = launch._int8_tile_args(fa, fw, out2, config, mode)
    a4w4_int8_kernel[(items,)](*args, **consts, PDL=False, launch_pdl=True)
    return fa


original = launch.launch_int8
for m, n, k, cfg in CASES:
    _, w = _operands(m, n, k, 7)
    inputs = [_operands(m, n, k, 100 + i)[0] for i in range(8)]
    launch.INT8_PDL = 0
    launch.launch_int8 = original
    want = [_call(a, w, cfg) for a in inputs]
    torch.cuda.synchronize()
    launch.launch_int8 = no_wait
    for attempt in range(3):
        got = [_call(a, w, cfg) for a in inputs]
        torch.cuda.synchronize()
        bad = sum(not torch.equal(g.view(torch.int16), x.view(torch.int16)) for g, x in zip(got, want))
        print(f"{m}x{n}x{k} no-wait attempt {attempt}: {bad} of 8 calls differ")
launch.launch_int8 = original
