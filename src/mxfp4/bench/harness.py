"""The benchmark: what users run, beside cuBLAS bf16, under the competition's timing rule.

Per shape and data set (``data.py``: the task's randn inputs, or model-like ones), on a GPU:
``mxfp4.task.custom_kernel(data)`` (the weight as the task stores it),
``MXFP4Linear`` (the weight prepared once at construction) and ``torch.mm`` on bf16 operands
(cuBLAS), each timed with L2 flushed before every call (``timing.ColdTimer``); the stream floor (one
launch that only reads the weight's bytes once and writes C, ``cuda.ops.stream_floor``, fastest of
``FLOOR_GRIDS``) and our time as a multiple of it; the roofline (:func:`roofline_us`: that floor or the
int8 compute term, whichever is longer) and our time as a multiple of it; the host time of
one eager call of each; the bytes each path keeps per weight; and the exactness of both mxfp4
outputs against the float64 oracle. With a peer (``--peer humming``, :mod:`.peers`): humming-kernels' W4A8 and
W4A16 layers on the same weights, timed the same way in the same run, and ours over its W4A8. On a machine
without a usable GPU the same shapes run the CPU reference path, timed by wall clock, and the table says so.
"""
from __future__ import annotations

import csv
import datetime
import pathlib
import platform
import time

import torch

from .. import task, testing
from ..device import cuda_supported
from ..nn import MXFP4Linear
from . import peers
from .data import shuffled_weight, task_data
from .shapes import Shape
from .timing import ColdTimer, geomean

COLUMNS = ("shape", "data", "mxfp4_us", "prepared_us", "cublas_bf16_us", "ratio", "floor_us", "x_floor", "roofline_us",
           "x_roofline", "tflops", "host_us", "host_prepared_us", "host_mm_us", "kept_bytes", "bitident", "violations",
           "humming_w4a8_us", "humming_w4a16_us", "x_humming_w4a8", "humming_w4a16_err")

INT8_PEAK = 1934e12
"""The H200's int8 tensor-core rate, ops/s: wgmma m64n256k32 (s8.s8.s32) on shared-memory operands, one CTA an
SM, measured at 1931-1942 TOPS on an H200 on 2026-12-01 (../shared/bench/README.md). The kernels multiply the
e2m1 codes as int8 on it, so 2*M*N*K / INT8_PEAK is the compute time no launch of ours can beat."""


TIMED_COLUMNS = (("custom_kernel us", "mxfp4_us", ".2f"), ("prepared (MXFP4Linear) us", "prepared_us", ".2f"),
                 ("cuBLAS bf16 us", "cublas_bf16_us", ".2f"), ("ratio", "ratio", ".2f"),
                 ("floor us", "floor_us", ".2f"), ("x floor", "x_floor", ".2f"),
                 ("roofline us", "roofline_us", ".2f"), ("x roofline", "x_roofline", ".2f"))
"""The GPU table's timed columns after shape and data: header, the row's key, format; the geomean row has each."""

PEER_COLUMNS = (("humming W4A8 us", "humming_w4a8_us", ".2f"), ("humming W4A16 us", "humming_w4a16_us", ".2f"),
                ("ours / humming W4A8", "x_humming_w4a8", ".2f"))
"""The timed columns a run with ``--peer humming`` adds after :data:`TIMED_COLUMNS`."""


def roofline_us(shape: Shape, floor_us: float | None = None) -> float:
    """The time ``shape`` cannot beat on the H200: ``max(2*M*N*K / INT8_PEAK, floor_us)``, the int8 compute
    term or the measured stream floor (one launch that reads the weight once and writes C), whichever is
    longer; the compute term alone where no floor was measured (``floor_us`` None: the CPU path)."""
    compute_us = shape.flops / INT8_PEAK * 1e6
    return compute_us if floor_us is None else max(compute_us, floor_us)



def _host_us(fn, calls: int = 50) -> float:
    """Host (CPU) time of one eager call: the mean over ``calls`` back-to-back calls, not synced."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def bench_gpu(shapes: tuple[Shape, ...], progress=print, data_set: str = "randn",
              peer: peers.Humming | None = None) -> list[dict]:
    from ..cuda import ops as cuda_ops

    timer = ColdTimer()
    rows = []
    for i, s in enumerate(shapes):
        data = task_data(s.m, s.n, s.k, s.seed, data_set, "cuda")
        a, b, _, b_shuffle, b_scale = data
        w = shuffled_weight(data)
        layer = MXFP4Linear.from_mxfp4(w)
        out = task.custom_kernel(data)
        report = testing.check_gemm(out, a, w, testing.sample_rows(s.m))
        same_layer = torch.equal(layer(a), out)
        scratch = torch.empty(s.m, s.n, dtype=torch.bfloat16, device="cuda")
        floor = min(timer.time(lambda: cuda_ops.stream_floor(b_shuffle, b_scale, scratch, c)).mean_us
                    for c in cuda_ops.FLOOR_GRIDS)
        row = {
            "shape": s.label,
            "data": data_set,
            "floor_us": floor,
            "mxfp4_us": timer.time(lambda: task.custom_kernel(data)).mean_us,
            "prepared_us": timer.time(lambda: layer(a)).mean_us,
            "cublas_bf16_us": timer.time(lambda: torch.mm(a, b.t())).mean_us,
            "host_us": _host_us(lambda: task.custom_kernel(data)),
            "host_prepared_us": _host_us(lambda: layer(a)),
            "host_mm_us": _host_us(lambda: torch.mm(a, b.t())),
            "kept_bytes": layer.kept_bytes(),
            "bitident": report.identical_fraction,
            "violations": report.violations + report.nonfinite_mismatch + (0 if same_layer else 1),
        }
        row["ratio"] = row["mxfp4_us"] / row["cublas_bf16_us"]
        row["x_floor"] = row["mxfp4_us"] / floor
        row["roofline_us"] = roofline_us(s, floor)
        row["x_roofline"] = row["mxfp4_us"] / row["roofline_us"]
        row["tflops"] = s.flops / row["mxfp4_us"] / 1e6
        peer_note = ""
        if peer is not None:
            calls = peer.calls(w, s.m)  # the first call of each compiles its kernel (seconds)
            row["humming_w4a16_err"] = peers.w4a16_error(calls["w4a16"](a), a, w, testing.sample_rows(s.m))
            row["humming_w4a8_us"] = timer.time(lambda: calls["w4a8"](a)).mean_us
            row["humming_w4a16_us"] = timer.time(lambda: calls["w4a16"](a)).mean_us
            row["x_humming_w4a8"] = row["mxfp4_us"] / row["humming_w4a8_us"]
            peer_note = (f", humming W4A8 {row['humming_w4a8_us']:.2f}, W4A16 {row['humming_w4a16_us']:.2f} "
                         f"(error {row['humming_w4a16_err']:.1e})")
        rows.append(row)
        progress(f"[{i + 1}/{len(shapes)}] {s.label} {data_set}: {row['mxfp4_us']:.2f} us (cuBLAS bf16 "
                 f"{row['cublas_bf16_us']:.2f}, floor {floor:.2f}{peer_note})")
    return rows


def bench_cpu(shapes: tuple[Shape, ...], progress=print, data_set: str = "randn") -> list[dict]:
    rows = []
    for i, s in enumerate(shapes):
        data = task_data(s.m, s.n, s.k, s.seed, data_set, "cpu")
        start = time.perf_counter()
        out = task.custom_kernel(data)
        wall = (time.perf_counter() - start) * 1e6
        w = shuffled_weight(data)
        report = testing.check_gemm(out, data[0], w, testing.sample_rows(s.m))
        rows.append({"shape": s.label, "data": data_set, "mxfp4_us": wall, "roofline_us": roofline_us(s),
                     "x_roofline": wall / roofline_us(s), "bitident": report.identical_fraction,
                     "violations": report.violations + report.nonfinite_mismatch})
        progress(f"[{i + 1}/{len(shapes)}] {s.label} ({data_set}): reference path {wall / 1e3:.1f} ms")
    return rows


def format_table(rows: list[dict], gpu: bool) -> str:
    if not gpu:
        lines = ["| shape | data | CPU reference (ms, wall) | roofline us | x roofline | bit-identical | "
                 "bound violations |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['shape']} | {r['data']} | {r['mxfp4_us'] / 1e3:.1f} | {r['roofline_us']:.3g} | "
                  f"{r['x_roofline']:.3g} | {r['bitident']:.4%} | {r['violations']} |" for r in rows]
        lines.append("\nroofline us: the H200's int8 compute term 2*M*N*K / INT8_PEAK alone (on the GPU, the larger of "
                     "it and the stream floor measured in the run); x roofline: the CPU wall time over it")
        return "\n".join(lines)
    timed = TIMED_COLUMNS + (PEER_COLUMNS if any("humming_w4a8_us" in r for r in rows) else ())
    head = ["shape", "data", *(h for h, _, _ in timed), "TFLOP/s", "host us (custom / prepared / torch.mm)",
            "bytes kept per weight", "bit-identical", "violations"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["shape"], r["data"], *(format(r[key], f) for _, key, f in timed), f"{r['tflops']:.1f}",
                 f"{r['host_us']:.1f} / {r['host_prepared_us']:.1f} / {r['host_mm_us']:.1f}", f"{r['kept_bytes']:,}",
                 f"{r['bitident']:.4%}", str(r["violations"])]
        lines.append("| " + " | ".join(cells) + " |")
    for data_set in dict.fromkeys(r["data"] for r in rows):
        sel = [r for r in rows if r["data"] == data_set]
        cells = ["geomean", data_set, *(format(geomean([r[key] for r in sel]), f) for _, key, f in timed)]
        lines.append("| " + " | ".join(cells) + " |" + " |" * (len(head) - len(cells)))
    if any("humming_w4a8_us" in r for r in rows):
        worst = max(r["humming_w4a16_err"] for r in rows)
        lines.append(f"\nhumming: its layer(a) on our weights; W4A8: A to fp8 e4m3 by its own per-row quantizer (a "
                     f"second launch, timed), W4A16: A in bf16; neither quantizes A to MXFP4 as ours does. W4A16 "
                     f"against float64 A @ W^T: error up to {worst:.1e} of the largest output (bf16 rounding: a few "
                     f"1e-3)")
    return "\n".join(lines)


def environment() -> dict:
    import subprocess

    try:
        here = pathlib.Path(__file__).parent
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=here).stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", str(here.parent)],
                               capture_output=True, text=True, cwd=here).stdout.strip()
        if dirty and commit != "unknown":
            commit += "+modified"  # the source that ran is not the commit's
    except OSError:
        commit = "unknown"
    env = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "python": platform.python_version(),
           "commit": commit, "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
    try:
        import cuda.core

        env["cuda.core"] = cuda.core.__version__
        from ..cuda import jit

        env["nvrtc"] = ".".join(map(str, jit.nvrtc_version()))
    except Exception:  # noqa: BLE001 - the CPU path runs without the CUDA packages
        pass
    return env


def run(shapes: tuple[Shape, ...], record: pathlib.Path | None = None, progress=print,
        data_sets: tuple[str, ...] = ("randn",), rows: list[dict] | None = None, peer: str | None = None) -> str:
    """Benchmark ``shapes`` on each of ``data_sets`` (names of ``data.DATA_SETS``); returns the report
    (markdown). ``record`` appends the rows to a CSV; ``rows``, a list, receives them (for
    :mod:`mxfp4.bench.plot`). ``peer`` ('humming', GPU only) times that library beside ours (ImportError
    saying how to install it where it does not import)."""
    out_rows = rows
    driver = peers.load(peer) if peer is not None else None
    gpu = torch.cuda.is_available() and cuda_supported(torch.device("cuda"))
    if driver is not None and not gpu:
        raise ValueError(f"--peer {peer} times on a Hopper GPU; this machine runs the CPU reference path")
    env = environment()
    if driver is not None:
        env[f"{driver.name}-kernels"] = driver.version
    progress(f"mxfp4 bench on {'the GPU (' + env['device'] + ')' if gpu else 'the CPU reference path (no Hopper GPU)'}")
    if gpu:
        rows = [r for d in data_sets for r in bench_gpu(shapes, progress, d, driver)]
    else:
        rows = [r for d in data_sets for r in bench_cpu(shapes, progress, d)]
    if out_rows is not None:
        out_rows.extend(rows)
    head = ", ".join(f"{k} {v}" for k, v in env.items())
    text = f"{head}\n\n{format_table(rows, gpu)}\n"
    if gpu and any(s.m >= 512 for s in shapes):
        from ..cuda import ops as cuda_ops

        tops = cuda_ops.int8_wgmma_tops(torch.device("cuda"))
        big = [r for r in rows if int(r["shape"].split("x")[0]) >= 512]
        text += (f"\nint8 wgmma peak measured in this run (m64n128k32 from shared memory, one CTA an SM): "
                 f"{tops:.0f} TOPS; the rows with M >= 512 run at {min(r['tflops'] for r in big) / tops:.0%} to "
                 f"{max(r['tflops'] for r in big) / tops:.0%} of it\n")
    if record is not None:
        stamp = {"date": env["date"], "device": env["device"], "commit": env["commit"]}
        append_rows(record, [{**stamp, **r} for r in rows])
    return text


def append_rows(record: pathlib.Path, rows: list[dict]) -> None:
    """Appends ``rows`` to the CSV ``record`` under the header ``("date", "device", "commit") + COLUMNS``. A file
    whose header lacks some of these (an older bench's) is rewritten once under the union of both, its rows
    kept, so no row lands under another column's name."""
    fields = ("date", "device", "commit") + COLUMNS
    record.parent.mkdir(parents=True, exist_ok=True)
    kept = []
    mode = "w"
    if record.exists() and record.stat().st_size:
        with record.open(newline="") as f:
            reader = csv.DictReader(f)
            old = tuple(reader.fieldnames or ())
            if set(fields) <= set(old):
                fields, mode = old, "a"
            else:
                kept = list(reader)
                fields += tuple(k for k in old if k not in fields)
    with record.open(mode, newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if mode == "w":
            writer.writeheader()
        writer.writerows(kept + rows)
