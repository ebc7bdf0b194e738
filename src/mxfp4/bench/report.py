"""Benchmark results: the row type, the terminal table, geometric means, CSV, JSON with metadata, a PNG."""
from __future__ import annotations

import csv
import dataclasses
import datetime
import json
import math
import platform
import shutil
import subprocess
from pathlib import Path

import torch

from .timing import geomean

TIMING_RULE = ("per call: synchronize, flush L2 by writing {flush}, record a CUDA event, call from Python, "
               "record an event, synchronize; repeat until the relative standard error of the mean is "
               "below 1% or the budget is spent; us = mean")
FLOOR_RULE = ("floor_us = max(bytes / copy bandwidth, FLOPs / matmul rate), bytes = A bf16 + W fp4 + "
              "W scales + C bf16, ceilings measured in the same run; pct_of_floor = floor_us / us * 100")

@dataclasses.dataclass
class Row:
    """One (shape, provider) result of the harness; NaN / None where a figure does not apply."""

    m: int
    n: int
    k: int
    seed: int
    group: str
    provider: str
    status: str = "ok"  # ok | skipped | failed
    note: str = ""
    timing: str = ""
    us: float = math.nan
    std_us: float = math.nan
    best_us: float = math.nan
    worst_us: float = math.nan
    runs: int = 0
    tflops: float = math.nan
    gbps: float = math.nan
    speedup_vs_bf16: float = math.nan
    floor_us: float = math.nan
    pct_of_floor: float = math.nan
    stream_floor_us: float = math.nan
    pct_of_stream_floor: float = math.nan
    rel_err: float = math.nan
    max_excess: float = math.nan
    identical_fraction: float = math.nan
    passes: bool | None = None

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


COLUMNS = tuple(f.name for f in dataclasses.fields(Row))


# (header, row field, width, format); the terminal table, in order.
TABLE = (("shape", "label", 16, "s"), ("provider", "provider", 15, "s"), ("us", "us", 9, "us"),
         ("+-std", "std_us", 7, "us"), ("best", "best_us", 8, "us"), ("TFLOP/s", "tflops", 8, ".3g"),
         ("GB/s", "gbps", 7, ".4g"), ("x bf16", "speedup_vs_bf16", 6, ".3g"), ("%floor", "pct_of_floor", 6, ".3g"),
         ("%strm", "pct_of_stream_floor", 6, ".3g"), ("rel_err", "rel_err", 8, ".2e"),
         ("excess", "max_excess", 6, ".2g"), ("pass", "passes", 4, "s"))


def _fmt(value, width: int, spec: str) -> str:
    """One cell: strings left-aligned and cut to width, numbers right-aligned and never cut."""
    if isinstance(value, str):
        return value[:width].ljust(width)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "NO"
    elif spec == "us":  # 3 significant digits below 100 us, whole microseconds above
        text = format(value, ".3g" if abs(value) < 100 else ".0f")
    else:
        text = format(value, spec)
    return text.rjust(width)


def summarize(rows) -> list[dict]:
    """Per provider: geometric means over the shapes it ran on, and how many those were."""
    out = []
    for name in dict.fromkeys(r.provider for r in rows):
        ok = [r for r in rows if r.provider == name and r.status == "ok"]
        checked = [r.passes for r in ok if r.passes is not None]
        out.append({"provider": name, "shapes": len(ok),
                    "geomean_us": geomean([r.us for r in ok]),
                    "geomean_speedup_vs_bf16": geomean([r.speedup_vs_bf16 for r in ok]),
                    "geomean_pct_of_floor": geomean([r.pct_of_floor for r in ok]),
                    "geomean_pct_of_stream_floor": geomean([r.pct_of_stream_floor for r in ok]),
                    "all_pass": all(checked) if checked else None})
    return out


def format_table(rows, summary: list[dict] | None = None) -> str:
    """Fixed-width table of the rows, skipped and failed ones with their reason, then the geomeans."""
    lines = []
    timings = sorted({r.timing for r in rows})
    lines.append("timing: " + "; ".join(timings))
    lines.append(" ".join(h.rjust(w) if f not in ("label", "provider") else h.ljust(w) for h, f, w, _ in TABLE))
    for r in rows:
        cells = [_fmt(r.label if f == "label" else getattr(r, f), w, spec) for _, f, w, spec in TABLE[:2]]
        if r.status != "ok":
            lines.append(" ".join(cells) + f" {r.status}: {r.note}")
            continue
        cells += [_fmt(getattr(r, f), w, spec) for _, f, w, spec in TABLE[2:]]
        lines.append(" ".join(cells))
    if summary:
        lines.append("geometric means over the shapes each provider ran on:")
        for s in summary:
            if not s["shapes"]:
                lines.append(f"  {s['provider']:<15} n=0   not run")
                continue
            passed = "" if s["all_pass"] is None else ("  all exact" if s["all_pass"] else "  NOT ALL EXACT")
            lines.append(f"  {s['provider']:<15} n={s['shapes']:<3} {_fmt(s['geomean_us'], 9, 'us')} us"
                         f"  x bf16 {_fmt(s['geomean_speedup_vs_bf16'], 6, '.3g')}"
                         f"  %floor {_fmt(s['geomean_pct_of_floor'], 6, '.3g')}"
                         f"  %stream {_fmt(s['geomean_pct_of_stream_floor'], 6, '.3g')}{passed}")
    return "\n".join(lines)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def metadata(device: torch.device, ceilings=None, *, shape_set: str | None = None, budget_s: float | None = None,
             timing: str = "", flush_bytes: int | None = None) -> dict:
    """Date, device, versions, git commit, CUDA version, ceilings and the timing rule of a run."""
    import mxfp4
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = None
    cuda = device.type == "cuda"
    props = torch.cuda.get_device_properties(device) if cuda else None
    status = _git("status", "--porcelain")  # untracked sources change what runs too
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": props.name if cuda else f"CPU ({platform.processor() or platform.machine()})",
        "sm_count": props.multi_processor_count if cuda else None,
        "torch": torch.__version__, "triton": triton_version, "mxfp4": mxfp4.__version__,
        "python": platform.python_version(), "cuda": torch.version.cuda,
        "git_commit": _git("rev-parse", "HEAD"), "git_dirty": None if status is None else bool(status),
        "ceilings": ceilings.to_dict() if ceilings is not None else None,
        "timing": timing, "timing_rule": (TIMING_RULE.format(flush=f"{(flush_bytes or 0) / 2 ** 30:g} GiB") if cuda
                        else "wall clock of each call, CPU reference path"),
        "floor_rule": FLOOR_RULE, "shape_set": shape_set, "budget_s": budget_s,
    }


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_results(rows, summary: list[dict], meta: dict, out_dir: str | Path | None = None,
                  plot: bool = True) -> list[Path]:
    """Write results.csv, results.json and (matplotlib permitting) results.png; returns the paths.

    Default ``out_dir``: results/<UTC timestamp>/, then copied to results/latest.{csv,json,png}.
    """
    default = out_dir is None
    if default:
        out_dir = Path("results") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dicts = [dataclasses.asdict(r) for r in rows]
    columns = list(dicts[0]) if dicts else []
    paths = [out_dir / "results.csv", out_dir / "results.json"]
    with open(paths[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(dicts)
    doc = {"metadata": meta, "columns": columns, "rows": [{k: _clean(v) for k, v in d.items()} for d in dicts],
           "summary": [{k: _clean(v) for k, v in s.items()} for s in summary]}
    paths[1].write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    if plot:
        png = out_dir / "results.png"
        if plot_results(rows, png, title=f"{meta.get('device')}  ({meta.get('timing')})"):
            paths.append(png)
    if default:
        for p in list(paths):
            latest = out_dir.parent / f"latest{p.suffix}"
            shutil.copyfile(p, latest)
            paths.append(latest)
    return paths


def plot_results(rows, path: Path, title: str = "") -> bool:
    """Two panels: time per shape per provider (log y), and percent of the floor. False without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return False
    ok = [r for r in rows if r.status == "ok"]
    labels = list(dict.fromkeys(r.label for r in rows))
    names = list(dict.fromkeys(r.provider for r in ok))
    fig = Figure(figsize=(max(8.0, 1.1 * len(labels) + 3), 8), constrained_layout=True)
    ax_t, ax_f = fig.subplots(2, 1, sharex=True)
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs, us, pct = [], [], []
        for r in ok:
            if r.provider == name:
                xs.append(labels.index(r.label) + (i - (len(names) - 1) / 2) * width)
                us.append(r.us)
                pct.append(r.pct_of_floor)
        color = f"C{i % 10}"
        ax_t.bar(xs, us, width, label=name, color=color)
        ax_f.bar(xs, [0.0 if math.isnan(p) else p for p in pct], width, label=name, color=color)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("time per call (us)")
    if names:
        ax_t.legend(fontsize="small", ncol=min(len(names), 5))
    ax_t.set_title(title, fontsize="medium")
    ax_f.axhline(100, color="black", linewidth=0.8, linestyle="--")
    ax_f.set_ylabel("% of floor (floor_us / us)")
    if not any(math.isfinite(r.pct_of_floor) for r in ok):
        ax_f.text(0.5, 0.5, "no floor: ceilings are measured on a GPU only", transform=ax_f.transAxes, ha="center")
    ax_f.set_xlim(-0.5, len(labels) - 0.5)
    ax_f.set_xticks(range(len(labels)))
    ax_f.set_xticklabels(labels, rotation=45, ha="right", fontsize="small")
    fig.savefig(path, dpi=110)
    return True
