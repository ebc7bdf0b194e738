"""The tuner: for each shape, time candidate GemmParams under the competition rule, keep the fastest
exact one, and write the table that :func:`mxfp4.plan.choose` reads (JSON, written atomically)."""
from __future__ import annotations

import json
import math
import os
import pathlib
import tempfile

import torch

from . import plan, task, testing
from .bench.shapes import Shape
from .bench.timing import ColdTimer
from .ops import gemm_a4w4
from .tensor import Layout, MXFP4Tensor


def candidates(p: plan.Problem) -> list[plan.GemmParams]:
    """Variants worth timing for ``p``: tiles around the heuristic's, K split 1..8."""
    h = plan.heuristic(p)
    out = []
    for bn, warps_n in ((32, 2), (64, 2), (64, 4), (128, 4), (128, 8)):
        for split in sorted({1, 2, 3, 4, 6, 8, h.split}):
            if split > max(1, p.blocks // 2):
                continue
            kc = min(32, 4 * math.ceil(math.ceil(p.blocks / split) / 4))
            params = plan.GemmParams(bn, h.bm, warps_n, h.warps_m, kc, 4, 8, split)
            try:
                params.check()
            except ValueError:
                continue
            out.append(params)
    return out


def tune(shapes: tuple[Shape, ...], path: pathlib.Path, progress=print) -> dict:
    """Tunes ``shapes`` on the current GPU and merges the winners into the table at ``path``."""
    timer = ColdTimer()
    try:
        table = json.loads(path.read_text())
    except FileNotFoundError:
        table = {"device": torch.cuda.get_device_name(), "entries": []}
    entries = {(e["m"], e["n"], e["k"]): e for e in table["entries"]}
    for i, s in enumerate(shapes):
        data = task.generate_input(s.m, s.n, s.k, s.seed, "cuda")
        a = data[0]
        w = MXFP4Tensor(data[3], data[4], (s.n, s.k), Layout.AITER_SHUFFLED)
        best = None
        for params in candidates(plan.Problem(s.m, s.n, s.k)):
            report = testing.check_gemm(gemm_a4w4(a, w, params=params), a, w, testing.sample_rows(s.m))
            if not report.passed:
                progress(f"  {params} is not exact on {s.label}: {report}; skipped")
                continue
            t = timer.time(lambda: gemm_a4w4(a, w, params=params), max_runs=40, budget_s=0.5).mean_us
            if best is None or t < best[0]:
                best = (t, params)
        if best is None:
            raise RuntimeError(f"no candidate was exact on {s.label}")
        entries[(s.m, s.n, s.k)] = {"m": s.m, "n": s.n, "k": s.k, "us": round(best[0], 2),
                                    "params": {f: getattr(best[1], f) for f in best[1].__dataclass_fields__}}
        progress(f"[{i + 1}/{len(shapes)}] {s.label}: {best[0]:.2f} us with {best[1]}")
    table["entries"] = [entries[key] for key in sorted(entries)]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(table, f, indent=1)
    os.replace(tmp, path)
    return table
