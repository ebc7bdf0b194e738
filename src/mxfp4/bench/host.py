"""Host (CPU) time per eager call of every entry point, beside torch's own (``mxfp4 bench --host``).

Per N x K and M in :data:`M_VALUES`, with the weight prepared once: ``gemm_a4w4(a, w, out=)``,
``task.custom_kernel(data)``, ``MXFP4Linear(a)``, ``torch.ops.mxfp4.gemm_a4w4``, and bf16
``torch.mm(a, b.t())`` and ``nn.Linear(a)``. Each call is timed alone, from entry to return, with
the GPU drained before it (so a full launch queue never blocks a launch and GPU time never enters);
the figure is the median of :data:`CALLS` calls. The targets (issue 41): gemm_a4w4 and custom_kernel
within torch.mm's + 10 us, MXFP4Linear and the op within nn.Linear's + 10 us.
"""
from __future__ import annotations

import statistics
import time

import torch

M_VALUES = (1, 16, 256, 1024)
CALLS = 300
SLACK_US = 10.0
DEFAULT_NK = ((2112, 7168), (3072, 1536))
"""The task's 16x2112x7168 and 256x3072x1536 weights (every variant they take ships precompiled)."""

PATHS = ("gemm_out", "custom_kernel", "linear", "op", "mm", "nn_linear")


def _median_us(fn, device: torch.device, calls: int = CALLS) -> float:
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize(device)
    return statistics.median(samples) * 1e6


@torch.no_grad()
def measure(m: int, n: int, k: int, device: torch.device, calls: int = CALLS) -> dict:
    """Median host microseconds per call of each of :data:`PATHS` at M x N x K."""
    from .. import ops, task
    from ..nn import MXFP4Linear
    from ..tensor import prepare, quantize

    g = torch.Generator(device=device).manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device, generator=g)
    b = torch.randn(n, k, dtype=torch.bfloat16, device=device, generator=g)
    w = prepare(quantize(b))
    data = (a, b, None, w.data, w.scales)
    layer = MXFP4Linear.from_mxfp4(w)
    linear = torch.nn.Linear(k, n, bias=False, device=device, dtype=torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    op = torch.ops.mxfp4.gemm_a4w4.default
    calls_by_path = {
        "gemm_out": lambda: ops.gemm_a4w4(a, w, out),
        "custom_kernel": lambda: task.custom_kernel(data),
        "linear": lambda: layer(a),
        "op": lambda: op(a, w.data, w.scales, n, k, True, False),
        "mm": lambda: torch.mm(a, b.t()),
        "nn_linear": lambda: linear(a),
    }
    return {"shape": f"{m}x{n}x{k}", **{f"{p}_us": _median_us(fn, device, calls) for p, fn in calls_by_path.items()}}


def format_table(rows: list[dict]) -> str:
    lines = ["| shape | gemm_a4w4(out=) | custom_kernel | torch.mm | MXFP4Linear | torch.ops.mxfp4 | nn.Linear | "
             f"within +{SLACK_US:.0f} us |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = (max(r["gemm_out_us"], r["custom_kernel_us"]) <= r["mm_us"] + SLACK_US
              and max(r["linear_us"], r["op_us"]) <= r["nn_linear_us"] + SLACK_US)
        lines.append(f"| {r['shape']} | {r['gemm_out_us']:.1f} | {r['custom_kernel_us']:.1f} | {r['mm_us']:.1f} | "
                     f"{r['linear_us']:.1f} | {r['op_us']:.1f} | {r['nn_linear_us']:.1f} | {'yes' if ok else 'NO'} |")
    return "\n".join(lines)


def run(shapes=None, progress=print) -> str:
    """The host-time table (markdown) for the N x K of ``shapes`` (default :data:`DEFAULT_NK`) at every
    M of :data:`M_VALUES`; needs a Hopper GPU (elsewhere no kernel runs, so there is no launch to time)."""
    from ..device import cuda_supported

    device = torch.device("cuda")
    if not (torch.cuda.is_available() and cuda_supported(device)):
        raise ValueError("--host times the kernels' launches: it needs a Hopper GPU")
    nks = list(dict.fromkeys((s.n, s.k) for s in shapes)) if shapes else list(DEFAULT_NK)
    rows = []
    for n, k in nks:
        for m in M_VALUES:
            rows.append(measure(m, n, k, device))
            progress(f"host {rows[-1]['shape']}: " + ", ".join(f"{p} {rows[-1][p + '_us']:.1f}" for p in PATHS))
    head = (f"host (CPU) us per eager call, median of {CALLS}, GPU drained before each call: "
            f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    return f"{head}\n\n{format_table(rows)}\n"
