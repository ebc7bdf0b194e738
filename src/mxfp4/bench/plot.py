"""The benchmark as a picture (``mxfp4 bench --plot FILE.png``): time per shape beside cuBLAS bf16
and the stream floor, and the ratio to cuBLAS, readable without the table.

Reads the harness's rows: ``shape`` and ``mxfp4_us`` always; ``cublas_bf16_us``, ``humming_w4a8_us``
(``--peer humming``) and ``floor_us`` (the time the bytes take at the measured stream bandwidth) where the run
has them. A CPU run (the reference path, no cuBLAS column) plots its wall times alone. matplotlib is
optional: without it, :func:`write` raises ImportError saying how to install it.
"""
from __future__ import annotations

import math
import pathlib

SERIES = (("mxfp4_us", "mxfp4 (custom_kernel)", "#1f77b4"), ("cublas_bf16_us", "cuBLAS bf16", "#7f7f7f"),
          ("humming_w4a8_us", "humming W4A8", "#ff7f0e"), ("floor_us", "stream floor", "#2ca02c"))


def _pyplot():
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("mxfp4 bench --plot needs matplotlib: pip install matplotlib") from e
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _number(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def write(rows: list[dict], path: pathlib.Path, title: str = "") -> pathlib.Path:
    """Draws ``rows`` into the PNG ``path``: per shape, bars of each series present (log scale, us),
    and below, where cuBLAS was timed, the ratio mxfp4 / cuBLAS bf16 against the line at 1."""
    if not rows:
        raise ValueError("no benchmark rows to plot")
    plt = _pyplot()
    shapes = [r["shape"] for r in rows]
    present = [(key, label, color) for key, label, color in SERIES
               if any(math.isfinite(_number(r.get(key))) for r in rows)]
    ratio = [_number(r.get("mxfp4_us")) / _number(r.get("cublas_bf16_us")) for r in rows]
    has_ratio = any(math.isfinite(x) for x in ratio)
    fig, axes = plt.subplots(2 if has_ratio else 1, 1, figsize=(max(6.0, 1.1 * len(rows) + 2), 7 if has_ratio else 4),
                             squeeze=False, sharex=True, gridspec_kw={"height_ratios": [2, 1]} if has_ratio else None)
    ax = axes[0][0]
    width = 0.8 / max(1, len(present))
    for i, (key, label, color) in enumerate(present):
        xs = [j + (i - (len(present) - 1) / 2) * width for j in range(len(rows))]
        ys = [_number(r.get(key)) for r in rows]
        bars = ax.bar(xs, [y if math.isfinite(y) else 0 for y in ys], width, label=label, color=color)
        for bar, y in zip(bars, ys):
            if math.isfinite(y):
                ax.annotate(f"{y:,.0f}" if y >= 100 else f"{y:.3g}", (bar.get_x() + bar.get_width() / 2, y),
                            ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 100 else f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    values = [y for key, _, _ in present for y in (_number(r.get(key)) for r in rows) if math.isfinite(y) and y > 0]
    # minor ticks labelled only within a decade (else the labels overlap)
    ax.yaxis.set_minor_formatter(plain if values and max(values) < 10 * min(values) else NullFormatter())
    ax.set_ylabel("time per call (us, log)")
    ax.set_title(title or "mxfp4 bench", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    if has_ratio:
        rx = axes[1][0]
        rx.bar(range(len(rows)), [x if math.isfinite(x) else 0 for x in ratio],
               color=["#d62728" if x > 1 else "#9467bd" for x in ratio])
        rx.axhline(1.0, color="black", linewidth=1)
        for j, x in enumerate(ratio):
            if math.isfinite(x):
                rx.annotate(f"{x:.2f}x", (j, x), ha="center", va="bottom", fontsize=8)
        rx.set_ylabel("mxfp4 / cuBLAS bf16\n(below 1: faster)")
        rx.grid(axis="y", alpha=0.3)
    bottom = axes[-1][0]
    bottom.set_xticks(range(len(rows)))
    bottom.set_xticklabels(shapes, rotation=30, ha="right", fontsize=8)
    bottom.set_xlabel("shape (M x N x K)")
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
