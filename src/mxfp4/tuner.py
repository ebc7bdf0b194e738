"""The tuner: time candidate configs per shape, accept only those that pass the exactness check."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterable

import torch

from . import launch, testing
from .tensor import Layout, MXFP4Tensor, quantize
from .tuning import KernelConfig, TunedTable, fused_steps, heuristic_config, pow2_at_least

TMA_BYTES = 256
"""int8_fused: weight bytes per thread and K step from which the tuner also offers ``w_tma``
(16 x 128 tiles of 8-block steps on 4 warps: 256; H200, twelfth session: that config gained
17.3 -> 15.5 us on 8x5760x2880 while 64-byte ones lost, docs/results/s12/wtma-run3.txt)."""

ONE_STEP_TMA_BYTES = 512
"""The same threshold for one-step segments, whose ``w_tma`` twin runs the step as a pipelined
loop in 2 stages (:func:`mxfp4.kernels.fused._segment_loop`). H200, thirteenth session
(docs/results/s13/loopstep-run1.txt): 512-byte ones gained up to 0.2 us (32x4096x512 8 x 128 on
4 warps 7.03 -> 6.82), 256-byte ones lost on every shape tried (8x5120x2880 16 x 128 on 8 warps
13.81 -> 16.45)."""


def candidate_configs(m: int, n: int, k: int, num_sms: int = 132) -> list[KernelConfig]:
    """The curated candidates of every kernel for one shape (see the helpers below); the
    heuristic config when none fits (shapes far smaller than the GPU). Kernels that lost every
    H200 sweep in a range of M are left out there (``mxfp4 tune --kernel`` still offers them):
    the persistent kernel where the int8 path runs (M >= 33, K >= 128: 1.6-2.4x slower than it
    on every tuned shape, e.g. 28.9 against 17.3 us on 64x7168x2048,
    docs/results/fused/trials-run1-bench.csv), and the two-launch int8 kernel at M <= 32
    (int8_fused beat it on every tuned shape, e.g. 18.2 against 22.5 us on 16x2112x7168).
    No candidate reads the packed weight (``packed``): it lost on every shape measured (e.g.
    12.6 -> 18.5 us on 256x3072x1536, docs/results/s7/packed-compare-run1.txt)."""
    int8_path = m >= 33 and k >= 128
    return (([] if int8_path else persistent_candidates(m, n, k, num_sms)) + direct_candidates(m, n, k, num_sms)
            + (int8_candidates(m, n, k, num_sms) if m >= 33 else [])
            + fused_candidates(m, n, k, num_sms)
            + meet_candidates(m, n, k, num_sms) or [heuristic_config(m, n, k, num_sms)])


def persistent_candidates(m: int, n: int, k: int, num_sms: int = 132) -> list[KernelConfig]:
    """Persistent kernel (H200 sweeps found BN 64, 4-warp 64x256 tiles, the tf32 scale dot and one block
    per step never best: docs/results/trials-*.csv): tiles that fit the shape; split-K keeping
    the work items between about a third of the SMs and 1.25 per SM (no split when the tiles
    alone are more); 2 or 4 blocks per step; 4 warps (8 for 64 x 128 tiles and up: twice
    those never won in docs/results/trials-bench.csv)."""
    bm = min(64, pow2_at_least(m, 16))
    out = []
    for bn in (128, 256):
        tiles = -(-m // bm) * -(-n // bn)
        for split in (1, 2, 3, 4, 6, 8, 12, 16):
            work = tiles * split
            if split > 1 and (split > k // 128 or work > 1.25 * num_sms):
                continue
            if work < num_sms // 3 and split < 16:
                continue
            warps = 8 if bm * bn >= 64 * 128 else 4
            for nbs in (2, 4):
                out.append(KernelConfig(bm, bn, split, warps, 3, nbs))
    return list(dict.fromkeys(out))


def direct_candidates(m: int, n: int, k: int, num_sms: int = 132) -> list[KernelConfig]:
    """Direct kernel: it quantizes A once per N tile, so only shapes where that stays cheap
    (M * K * N / BN at most ~24 M elements); tiles BM 16 / 32, BN 16 / 32 / 64; NB blocks per
    chunk, the largest of 16 / 8 / 4 with NB * BM * BN <= 8192 (its batched fp32 product lives in
    registers; the H200 sweeps found the largest best); split-K giving half to four programs per
    SM, each doing one to four chunks; 4 warps (8 never won)."""
    out = []
    blocks = max(1, k // 32)
    bms = sorted({min(32, pow2_at_least(m, 16)), 16})
    for bm in bms:
        for bn in (16, 32, 64):
            if m * k * -(-n // bn) > 24 * 2 ** 20:
                continue
            tiles = -(-m // bm) * -(-n // bn)
            nbs = [nb for nb in (16, 8, 4) if nb * bm * bn <= 8192 and nb <= blocks][:1]
            for nb in nbs:
                for split in (1, 2, 4, 8, 16, 32):
                    per = -(-blocks // split)
                    if per < nb or per > 4 * nb:
                        continue
                    progs = tiles * split
                    if progs < num_sms // 2 or progs > 4 * num_sms:
                        continue
                    out.append(KernelConfig(bm, bn, split, 4, 1, nb, "direct"))
    return list(dict.fromkeys(out))


def int8_candidates(m: int, n: int, k: int, num_sms: int = 132) -> list[KernelConfig]:
    """int8 kernel (two launches; M >= 16, as wgmma tiles have 64 rows). Tiles that compile
    without spills on sm_90 with the fold over all of K: 128 x 256 and 128 x 128 on 8 warps,
    64 x 128 on 4; K steps of 2, 4 or 8 blocks, 3, 4 or 6 stages (the first H200 sweep,
    docs/results/int8/trials-run*.csv, dropped 64 x 256). 64 x 128 also with 6 and 8 stages and
    8-block steps: at M = 64 the K loop waits on its loads (3 -> 4 stages: 19.4 -> 17.6 us on
    64x7168x2048, docs/results/meet/trials-run2-m64.csv). Segments of
    16 blocks on the tiles that keep both accumulators in registers (64 x 256, 64 x 128):
    sturdier where rows spread widely along K, as a segment that does not fold costs a
    block-by-block pass (8 blocks was slower). Where the tiles leave SMs idle, split-K over
    64-row tiles, from half to one and a half programs per SM (on 64 x 128 also with 8-block
    steps and 4 stages). Up to M = 256 also 64 x 64 tiles (8-block steps, 4 or 6 stages) and 64 x
    128 on 8 warps: twice the programs where 64 x 128 tiles leave SMs idle (64x7168x2048: 56
    programs on 132 SMs); 64 x 64 won 9 of the 11 tuned M = 64 layers
    (docs/results/s6/trials-run3-*.csv). 64 x 64 also in 3 stages (98 KB of shared memory), so
    that two programs fit on an SM (int8_meet then runs two per SM where there are more tiles
    than SMs: docs/results/s9/meet-grid-run14.txt). Up to M = 128 also 64 x 32 tiles: a program
    alone on an SM streams its K steps at about 70 GB/s (H200, K-step timelines,
    docs/results/s16/tl-steps-run3.txt), so twice the programs can pay for re-reading A; they
    won 9 of the 17 shapes at M = 64 .. 128 where they were offered (e.g. 64x2880x4096 13.27 ->
    12.31 us; docs/results/s16/trials-run5.csv, run6/), where split-K on 64 x 64 tiles lost all
    6 shapes where offered, by 1.1-3.2 us. At M = 192 .. 512 (not offered) they lost on all 6
    shapes tried (docs/results/s16/configs-run10.txt)."""
    if m < 16 or k < 128:
        return []
    whole = ((128, 256, 8, 4, 3), (128, 256, 8, 4, 4), (128, 256, 8, 2, 6), (128, 128, 8, 8, 3), (128, 128, 8, 4, 4),
             (64, 128, 4, 4, 3), (64, 128, 4, 4, 4), (64, 128, 4, 4, 6), (64, 128, 4, 4, 8), (64, 128, 4, 8, 4))
    if m <= 256:  # twice the programs of 64 x 128 where those leave SMs idle
        whole += ((64, 64, 4, 8, 3), (64, 64, 4, 8, 4), (64, 64, 4, 8, 6), (64, 128, 8, 8, 4))
    out = [KernelConfig(bm, bn, 1, warps, stages, nbs, "int8")
           for bm, bn, warps, nbs, stages in whole if bm <= max(64, m)]
    blocks = k // 32
    if blocks > 16:
        out += [KernelConfig(bm, bn, 1, warps, 3, 4, "int8", 16)
                for bm, bn, warps in ((64, 256, 8), (64, 128, 4))]
    for bm, bn, warps in ((64, 128, 4), (64, 256, 8)):
        tiles = -(-m // bm) * -(-n // bn)
        for split in (2, 3, 4, 6, 8):
            if num_sms // 2 <= tiles * split <= 1.5 * num_sms and blocks >= 8 * split:
                out.append(KernelConfig(bm, bn, split, warps, 3, 4, "int8"))
                if bn == 128 and blocks >= 16 * split:
                    out.append(KernelConfig(bm, bn, split, warps, 4, 8, "int8"))
    if m <= 128:  # 64 x 32 tiles: twice the programs of 64 x 64 where those leave SMs idle
        out += [KernelConfig(64, 32, 1, 4, stages, 8, "int8") for stages in (4, 6)]
    return out


def meet_candidates(m: int, n: int, k: int, num_sms: int = 132) -> list[KernelConfig]:
    """One-launch persistent int8 kernel for M = 33 .. 256: the int8 kernel's 64 x 128,
    64 x 64 and 64 x 32 candidates (the same work items, after the fold and the meeting). At M = 512 it
    lost to the two-launch path on all 11 model layers by 20-50 % with one program per SM
    walking 4-8 tiles each (docs/results/meet/trials-run4-m512.csv), before it ran two per SM;
    so from M = 257 to 1024 three candidates only: 64 x 64 in 3 stages (two per SM) and two
    64 x 128. At M <= 32 int8_fused beat the int8 work items on every tuned shape (session 4).
    Tiles of 128 rows spill in this kernel (255 registers) and were slower on 256x3072x1536
    (docs/results/s11/configs-run1.txt)."""
    if not 33 <= m <= 1024 or k < 128:
        return []
    if m > 256:
        return [KernelConfig(64, 64, 1, 4, 3, 8, "int8_meet"), KernelConfig(64, 128, 1, 4, 3, 4, "int8_meet"),
                KernelConfig(64, 128, 1, 4, 4, 8, "int8_meet")]
    return [dataclasses.replace(c, kernel="int8_meet") for c in int8_candidates(m, n, k, num_sms)
            if c.block_m == 64 and c.block_n in (32, 64, 128)]


def fused_candidates(m: int, n: int, k: int, num_sms: int = 132) -> list[KernelConfig]:
    """One-launch int8 kernel (each program folds its A rows itself, so A is quantized N / BN
    times over: only where M * K * N / BN is at most 48 M elements). Tiles of 16 rows, and of
    min(64, M) rows; BN 32 .. 256; every K step of :func:`mxfp4.tuning.fused_steps`. Split-K so the
    programs number half to twice the SMs (no split: any number from half the SMs up), over the
    usual splits and those that make every segment one K step of 16 or 8 blocks (all of a
    program's loads at once; on 16x2112x7168 they came within 2.5 % of the winner,
    docs/results/s6/trials-run1-bench.csv). 4 warps, and 8 from 16 x 64 tiles up. At M = 17 .. 32
    also 8 A rows per program (each twice in the dot's 16 rows), BN 64 .. 256, no split: half the
    fold per program for twice the weight rows (32x2880x512: 6.66 against 6.81 us for 16 x 64,
    docs/results/s11/configs-run10.txt). At M <= 32, where a thread copies at least TMA_BYTES of
    weight per K step (ONE_STEP_TMA_BYTES where a segment is one step), also the same config with
    the weight through TMA (``w_tma``; a one-step twin in 2 stages)."""
    out = []
    blocks = k // 32
    if blocks < 1:
        return out
    for bm in sorted({min(64, pow2_at_least(m, 16)), 16} | ({8} if 16 < m <= 32 else set())):
        bmq = min(bm, pow2_at_least(m))
        for bn in (32, 64, 128, 256):
            n_tiles = -(-n // bn)
            if m * k * n_tiles > 48 * 2 ** 20 or (bm == 8 and bn == 32):
                continue
            tiles = -(-m // bmq) * n_tiles
            for split in sorted({1, 2, 3, 4, 6, 8, 12, 16} | {-(-blocks // b) for b in (16, 8)}):
                programs = tiles * split
                if (split > 1 and (programs > 2 * num_sms or bm == 8)) or programs < num_sms // 2:
                    continue
                for bps, seg in fused_steps(blocks, split, bmq):
                    for warps in ((4, 8) if bm * bn >= 16 * 64 else (4,)):
                        cfg = KernelConfig(bm, bn, split, warps, 1 if seg == bps else 3, bps, "int8_fused")
                        out.append(cfg)
                        if m <= 32 and bm <= 16 and bn * bps // warps >= (TMA_BYTES if seg > bps else
                                                                           ONE_STEP_TMA_BYTES):
                            out.append(dataclasses.replace(cfg, w_tma=True, num_stages=max(cfg.num_stages, 2)))
    return list(dict.fromkeys(out))


@dataclasses.dataclass(frozen=True)
class Trial:
    """One candidate on one shape: its time (us), or why it was rejected."""

    m: int
    n: int
    k: int
    config: KernelConfig
    us: float
    passed: bool
    note: str = ""


def _operands(m: int, n: int, k: int, seed: int, device: torch.device) -> tuple[torch.Tensor, MXFP4Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).to(device)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16).to(device)
    return a, quantize(b).to_layout(Layout.AITER_SHUFFLED if n % 16 == 0 and k % 64 == 0 else Layout.PLAIN)


def _run_kernel(a: torch.Tensor, w: MXFP4Tensor, cfg: KernelConfig, out: torch.Tensor) -> torch.Tensor:
    launch.launch_a4w4(a, w, out, cfg)
    return out


def tune(shapes: Iterable[tuple[int, int, int]], *, device: str | torch.device = "cuda",
         candidates: Callable[[int, int, int], list[KernelConfig]] = candidate_configs,
         run: Callable[[torch.Tensor, MXFP4Tensor, KernelConfig, torch.Tensor], torch.Tensor] = _run_kernel,
         time_us: Callable[[Callable[[], object]], float] | None = None,
         progress: bool = True, gpu: str | None = None, triton_version: str | None = None,
         jobs: int = 0) -> tuple[TunedTable, list[Trial]]:
    """Time every candidate on every shape; keep the fastest that passes the exactness check,
    two-launch configs handicapped (:func:`best_configs`).

    Each candidate is first checked on fresh random data (a seed the timing data does not use)
    with :func:`mxfp4.testing.check_gemm`; a candidate that fails or raises is never timed and
    never chosen. ``run(a, w, config, out)`` computes into ``out`` (NaN-poisoned for the check,
    preallocated outside the timed call otherwise); ``run`` and ``time_us`` exist so tests can
    inject a wrong or a fake candidate. ``jobs`` > 0 compiles the candidates first in that many
    worker processes (Triton's on-disk cache then serves the timed process); compiling, not
    timing, is most of a sweep's wall time.
    """
    device = torch.device(device)
    if time_us is None:
        from .bench.timing import ColdTimer

        timer = ColdTimer(device)
        time_us = lambda fn: timer.time(fn, min_runs=10, max_runs=60, budget_s=0.2).mean_us  # noqa: E731
    shapes = [tuple(int(v) for v in s) for s in shapes]
    plan = [(s, cfg) for s in shapes for cfg in candidates(*s)]
    if jobs > 0 and device.type == "cuda":
        precompile(plan, jobs, progress)
    bar = _progress(len(plan), progress)
    trials: list[Trial] = []
    for idx, ((m, n, k), cfg) in enumerate(plan):
        check_a, check_w = _operands(m, n, k, seed=1000 + idx, device=device)
        poisoned = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
        try:
            report = testing.check_gemm(run(check_a, check_w, cfg, poisoned), check_a, check_w,
                                        testing.sample_rows(m))
        except Exception as exc:  # a config that does not compile or launch is skipped, said so
            trials.append(Trial(m, n, k, cfg, math.nan, False, f"{type(exc).__name__}: {str(exc)[:120]}"))
            bar.update(1)
            continue
        if not report.passed:
            trials.append(Trial(m, n, k, cfg, math.nan, False, f"failed the exactness check: {report}"))
            bar.update(1)
            continue
        a, w = _operands(m, n, k, seed=idx, device=device)
        out = torch.empty((m, n), dtype=torch.bfloat16, device=device)
        trial = Trial(m, n, k, cfg, time_us(lambda: run(a, w, cfg, out)), True)
        trials.append(trial)
        bar.update(1)
    bar.close()
    if gpu is None:
        gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    if triton_version is None:
        import triton

        triton_version = triton.__version__
    from . import __version__

    return TunedTable(gpu, triton_version, __version__, tuple(best_configs(trials).items())), trials


TWO_LAUNCH_MARGIN = 0.05
"""A two-launch config is chosen only where it beats every one-launch config by more than this
fraction: issue 3 asks for one launch per call, and each launch also costs host time (Triton's
dispatch), which GPU timing does not see. On the H200 the two-launch int8 path, its multiply
launched as a programmatic dependent of the fold, beat int8_meet on the same tiles by 3.6-11 %
on 26 M = 64 .. 1024 shapes (fifteenth session, docs/results/s15/meet-vs-int8-run3.txt); before
that (plain launches) int8_meet came within 0.2-3.5 % of it on 9 of 12."""


def best_configs(trials: Iterable[Trial]) -> dict[tuple[int, int, int], KernelConfig]:
    """Shape -> the fastest config among the trials that passed (two-launch configs handicapped
    by :data:`TWO_LAUNCH_MARGIN`)."""
    best: dict[tuple[int, int, int], tuple[float, KernelConfig]] = {}
    for t in trials:
        if not t.passed:
            continue
        score = t.us * (1 + TWO_LAUNCH_MARGIN if t.config.launches > 1 else 1)
        if (t.m, t.n, t.k) not in best or score < best[(t.m, t.n, t.k)][0]:
            best[(t.m, t.n, t.k)] = (score, t.config)
    return {shape: cfg for shape, (_, cfg) in best.items()}


def write_trials(trials: list[Trial], path: str) -> None:
    """Every candidate of a sweep as CSV: shape, config fields, us (empty if rejected), note."""
    import csv

    fields = [f.name for f in dataclasses.fields(KernelConfig)]
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["m", "n", "k", *fields, "us", "passed", "note"])
        for t in trials:
            cfg = dataclasses.asdict(t.config)
            out.writerow([t.m, t.n, t.k, *(cfg[name] for name in fields),
                          "" if math.isnan(t.us) else f"{t.us:.3f}", t.passed, t.note])


def _compile_some(plan: list[tuple[tuple[int, int, int], KernelConfig]]) -> int:
    """Worker: run each (shape, config) once on small random data, so Triton compiles and caches it."""
    done = 0
    for (m, n, k), cfg in plan:
        try:
            a, w = _operands(m, n, k, seed=0, device=torch.device("cuda"))
            _run_kernel(a, w, cfg, torch.empty((m, n), dtype=torch.bfloat16, device="cuda"))
            torch.cuda.synchronize()
            done += 1
        except Exception:  # the timed pass reports it
            pass
    return done


def precompile(plan: list[tuple[tuple[int, int, int], KernelConfig]], jobs: int, progress: bool = True) -> None:
    """Compile the plan's kernels in ``jobs`` spawned processes (they share Triton's disk cache)."""
    import concurrent.futures
    import multiprocessing

    parts = [plan[i::jobs] for i in range(jobs)]
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        done = sum(pool.map(_compile_some, [p for p in parts if p]))
    if progress:
        print(f"tune: compiled {done}/{len(plan)} candidates in {jobs} processes", flush=True)


class _Plain:
    """Progress as a line every 20 candidates (when tqdm is missing), or nothing when quiet."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        self.total, self.done, self.quiet = total, 0, quiet

    def update(self, n: int) -> None:
        self.done += n
        if not self.quiet and (self.done % 20 == 0 or self.done == self.total):
            print(f"tune: {self.done}/{self.total} candidates", flush=True)

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    if not enabled:
        return _Plain(total, quiet=True)
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc="tune", unit="cfg")
    except ImportError:
        return _Plain(total)
