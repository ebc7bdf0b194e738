"""The tuner: for each shape, time the candidate kernels (below 33 rows the short-K kernel's
SmallParams (K <= 8192), the streaming GEMM's StreamParams, the banded GEMM's BandParams and the decode
kernels' DecodeParams; from
33 rows the short-K and decode kernels against the large-M kernels) under the competition rule, keep the fastest exact one, and write the table that :func:`mxfp4.plan.choose`
reads (JSON, written atomically).
Shapes above ``plan.TABLE_MAX_M`` rows always run the large-M kernels: they are skipped."""
from __future__ import annotations

import dataclasses
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


FINALISTS = 3
"""Candidates timed a second, longer round (the fastest of the first)."""


def candidates(p: plan.Problem, sm_count: int = 132) -> list[plan.KernelParams]:
    """Variants worth timing for ``p``: below ``plan.WGMMA_MIN_M`` rows those of the short-K kernel,
    the streaming GEMM, the banded GEMM and the decode kernels (``small_candidates``,
    ``stream_candidates``, ``band_candidates``, ``decode_candidates``), from there to ``plan.TABLE_MAX_M`` the short-K kernel's, the decode kernels'
    and the large-M kernels' (``wgmma_candidates``)."""
    if p.m >= plan.WGMMA_MIN_M:
        return small_candidates(p) + decode_candidates(p, sm_count) + wgmma_candidates(p, sm_count)
    return small_candidates(p) + stream_candidates(p) + band_candidates(p) + decode_candidates(p, sm_count)


def band_candidates(p: plan.Problem) -> list[plan.BandParams]:
    """The banded GEMM for ``p`` (up to ``plan.STREAM_MAX_M`` rows): tiles of 64, 128 and 192 rows (one to
    three warpgroups), units of 16 and 32 blocks, the codes' signs split over two wgmma or one wgmma on signed
    codes, the deepest ring that fits."""
    if p.m > plan.STREAM_MAX_M or p.k > plan.BAND_MAX_K:
        return []
    mt = next(t for t in (1, 2, 4) if 8 * t >= p.m)
    out = [plan.band_params(mt, wg, ks, 4, split) for wg in (1, 2, 3) for ks in (16, 32) for split in (True, False)]
    return [c for c in out if plan.valid(c)]


def stream_candidates(p: plan.Problem) -> list[plan.StreamParams]:
    """The streaming GEMM for ``p`` (up to ``plan.STREAM_MAX_M`` rows): tiles of 128 rows on two warps a
    group and of 64 rows on four, units of 16 and 32 blocks, the deepest ring that fits, the codes'
    signs split or not (the heuristic splits them up to 16 rows); at one row the one-token variant."""
    if p.m > plan.STREAM_MAX_M:
        return []
    mt = next(t for t in (1, 2, 4) if 8 * t >= p.m)
    out = [plan.stream_params(mt, g, kw, ks, split, p.m == 1) for g, kw in ((8, 2), (4, 4)) for ks in (16, 32)
           for split in (False, True)]
    return [c for c in out if plan.valid(c)]


def small_candidates(p: plan.Problem) -> list[plan.SmallParams]:
    """The short-K kernel for ``p`` (up to ``plan.TABLE_MAX_M`` rows, K at most 8192): K split over a
    group's warps by every divisor of K / 32 that leaves at most 24 blocks a warp (at K = 2880, 90
    blocks: 5, 6, 9, 10 or 15 warps), 4..16 warps a CTA. Up to 32 rows one tile of tokens, CTAs of 1, 2
    or 4 weight groups, A's quantization shared by clusters of 1..8 CTAs; above, tiles of 32 or 64 rows,
    CTAs of 2, 4 or 8 groups, clusters of 2..8 (H200: clusters of 1 quantize the whole tile in every
    CTA, 50.3 us against 23.4 at 256x3072x1536). Every cluster quantizes its whole tile of A (all of A
    up to 32 rows): at K = 7168 it won at 1 and 8 rows of N = 2112 (12.8 and 14.6 us against the decode
    kernels' 15.4 and 14.9) and lost at 16 (20.6 against 17.1) and at N = 4608 (27.3 against 20.8 at
    one row)."""
    if p.m > plan.TABLE_MAX_M or p.blocks > 256:
        return []
    if p.m <= 32:
        shapes = [(-(-p.m // 8), wg, cluster) for wg in (1, 2, 4) for cluster in (1, 2, 4, 8)]
    else:
        shapes = [(mt, wg, cluster) for mt in (4, 8) for wg in (2, 4, 8) for cluster in (2, 4, 8)]
    out = []
    for mt, wg, cluster in shapes:
        for kw in range(1, 17):
            if p.blocks % kw or p.blocks // kw > 24 or not 4 <= wg * kw <= 16:
                continue
            params = plan.SmallParams(wg, kw, mt, p.blocks, cluster)
            if plan.valid(params):
                out.append(params)
    return out


def wgmma_candidates(p: plan.Problem, sm_count: int = 132) -> list[plan.WgmmaParams]:
    """The large-M kernels' own choice and the converting GEMM on 64-token tiles with K split 1..8 ways
    while the grid stays within the SMs."""
    own = plan.wgmma_params(p, sm_count)
    ctas = plan.WGMMA_TN64.tiles(p)
    splits = [dataclasses.replace(plan.WGMMA_TN64, split=s) for s in (1, 2, 3, 4, 8) if s == 1 or ctas * s <= sm_count]
    return [own] + [c for c in splits if c != own and c.fits(p)]


def decode_candidates(p: plan.Problem, sm_count: int = 132) -> list[plan.DecodeParams]:
    """The decode kernels for ``p``: the fewest token rows that hold M, CTAs of 2..16 weight groups on
    4..16 warps, K split so the grid has 0.75 to 3 CTAs an SM and every warp at least two blocks,
    8 blocks in flight a warp (and 16 where a warp has that many), the weight through registers or
    through shared memory (``smem_weight``)."""
    mt = next((t for t in (1, 2, 4, 8) if 8 * t >= p.m), None)
    if mt is None:
        return []
    out = []
    for g, kw in ((2, 2), (2, 4), (4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (16, 1)):
        ctas_n = math.ceil(p.n / (16 * g))
        for split in (1, 2, 3, 4, 6, 8, 12, 16):
            per_warp = p.blocks / split / kw
            if split > p.blocks or per_warp < 2 or not 3 * sm_count // 4 <= ctas_n * split <= 3 * sm_count:
                continue
            for depth in ((8, 16) if per_warp >= 16 else (8,)):
                for smem_weight in (False, True):
                    params = plan.DecodeParams(mt, g, kw, depth, split, smem_weight=smem_weight)
                    if params.fits(p):
                        out.append(params)
    return out


def _compile_all(cands: list[plan.KernelParams]) -> None:
    """Compiles the candidates' kernels into the disk cache, one process per core."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from .cuda import jit

    variants = sorted({(p.source, tuple(sorted(p.defines().items()))) for p in cands})
    with ProcessPoolExecutor(max_workers=min(len(variants), os.cpu_count() or 1),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(jit.compile_cubin, [v[0] for v in variants], [dict(v[1]) for v in variants]))


def tune(shapes: tuple[Shape, ...], path: pathlib.Path, progress=print) -> dict:
    """Tunes ``shapes`` on the current GPU and merges the winners into the table at ``path``."""
    timer = ColdTimer()
    try:
        table = json.loads(path.read_text())
    except FileNotFoundError:
        table = {"device": torch.cuda.get_device_name(), "entries": []}
    entries = {(e["m"], e["n"], e["k"]): e for e in table["entries"]}
    for i, s in enumerate(shapes):
        if s.m > plan.TABLE_MAX_M:
            progress(f"[{i + 1}/{len(shapes)}] {s.label}: the large-M kernels run it (no table entry); skipped")
            continue
        data = task.generate_input(s.m, s.n, s.k, s.seed, "cuda")
        a = data[0]
        w = MXFP4Tensor(data[3], data[4], (s.n, s.k), Layout.AITER_SHUFFLED)
        cands = candidates(plan.Problem(s.m, s.n, s.k)) or [plan.heuristic(plan.Problem(s.m, s.n, s.k))]
        _compile_all(cands)
        progress(f"[{i + 1}/{len(shapes)}] {s.label}: timing {len(cands)} candidates")
        rows = testing.sample_rows(s.m)
        exact = testing.exact_product(a, w, rows)  # once: every candidate is checked against it
        first = []
        for params in cands:
            out = gemm_a4w4(a, w, params=params)
            if rows is not None:
                out = out[rows.to(out.device)]
            report = testing.compare_with_exact(out, *exact, s.k)
            if not report.passed:
                progress(f"  {params} is not exact on {s.label}: {report}; skipped")
                continue
            first.append((timer.time(lambda: gemm_a4w4(a, w, params=params), max_runs=4, budget_s=0.05).mean_us,
                          params))
        if not first:
            raise RuntimeError(f"no candidate was exact on {s.label}")
        # The fastest few again, longer: the first round's means carry a few percent of noise.
        finalists = [p for _, p in sorted(first, key=lambda x: x[0])[:FINALISTS]]
        final = [(timer.time(lambda: gemm_a4w4(a, w, params=p), max_runs=25, budget_s=0.3).mean_us, p)
                 for p in finalists]
        best = min(final, key=lambda x: x[0])
        entries[(s.m, s.n, s.k)] = {"m": s.m, "n": s.n, "k": s.k, "us": round(best[0], 2),
                                    "kernel": plan.kernel_name(best[1]),
                                    "params": {f: getattr(best[1], f) for f in best[1].__dataclass_fields__}}
        progress(f"[{i + 1}/{len(shapes)}] {s.label}: {best[0]:.2f} us with {best[1]}")
        _write(table, entries, path)  # after every shape: an interrupted run keeps what it measured
    _write(table, entries, path)
    return table


def _write(table: dict, entries: dict, path: pathlib.Path) -> None:
    table["entries"] = [entries[key] for key in sorted(entries)]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(table, f, indent=1)
    os.replace(tmp, path)
