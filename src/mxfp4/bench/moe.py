"""The mixture-of-experts GEMM benchmark (``python -m mxfp4.bench.moe``, a Hopper GPU): ``grouped_gemm_a4w4``
against bf16 ``torch._grouped_mm`` on the same routing, under the competition rule (L2 flushed before
every call, CUDA events), on DeepSeek-R1's and GPT-OSS's expert projections at top-k routing of 1, 16,
128 and 4096 tokens. Per row: the touched experts' MXFP4 bytes, the stream floor (one launch that only
reads that many bytes of the stacked weight once and writes C, ``cuda.ops.stream_floor``, fastest of
``FLOOR_GRIDS``, timed the same way) and our time as a multiple of it, and the outputs checked against the
exact product (every row up to 128 tokens, the first experts' rows up to 512 above) and for determinism.
``--data`` picks the activations: randn (the default), the bench's model-like or heavy-tailed rows
(``bench/data.py``), or all three; the experts' weights are randn.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from .. import plan, quantize, testing
from ..device import cuda_supported
from ..moe import ExpertWeights, grouped_gemm_a4w4
from .data import DATA_SETS, heavy_tailed, model_like
from .timing import ColdTimer

MODELS = (  # name, experts, N, K, top-k
    ("DeepSeek-R1 gate_up", 256, 4096, 7168, 8),
    ("DeepSeek-R1 down", 256, 7168, 2048, 8),
    ("GPT-OSS gate_up", 128, 5760, 2880, 4),
    ("GPT-OSS down", 128, 2880, 2880, 4),
)
TOKENS = (1, 16, 128, 4096)
CHECK_ROWS = 512
"""Above 128 tokens the check covers the first experts' rows up to this many (the exact product of all
32,768 rows of 4096 x 8 pairs would take minutes)."""


def routing(tokens: int, experts: int, top: int, seed: int) -> torch.Tensor:
    """Rows per expert [E] when each of ``tokens`` tokens picks ``top`` distinct experts at random (seeded)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(tokens, experts, generator=g).topk(top, dim=1).indices.flatten().bincount(minlength=experts)


def _bf16(a: torch.Tensor, w_t: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    return torch._grouped_mm(a, w_t, offs=offsets)


def _check(out, a, w: ExpertWeights, counts: list[int], rows: int) -> testing.ExactnessReport:
    exact, mag, start = [], [], 0
    for e, c in enumerate(counts):
        if start >= rows:
            break
        if c:
            x, m = testing.exact_product(a[start:start + c], w.plain(e))
            exact.append(x)
            mag.append(m)
        start += c
    return testing.compare_with_exact(out[:start], torch.cat(exact), torch.cat(mag), w.k)


def activations(data: str, t: int, k: int, seed: int, g: torch.Generator) -> torch.Tensor:
    """A [t, k] bf16 on the GPU: randn from ``g``, or the bench's model-like or heavy-tailed rows (seeded)."""
    if data == "randn":
        return torch.randn(t, k, generator=g, device=g.device, dtype=torch.bfloat16)
    return (model_like if data == "model" else heavy_tailed)(t, 1, k, seed, g.device)[0]


def run(tokens_list=TOKENS, models=MODELS, progress=print, data=("randn",)) -> list[dict]:
    """One row per (model projection, token count, data set); see the module's docstring."""
    timer = ColdTimer(torch.device("cuda"))
    rows = []
    for model in models:
        rows += _projection(timer, *model, tokens_list, progress, data)  # its weights are freed on return
        torch.cuda.empty_cache()
    return rows


def _projection(timer: ColdTimer, name: str, e: int, n: int, k: int, top: int, tokens_list, progress,
                data=("randn",)) -> list[dict]:
    dev = torch.device("cuda")
    kw = dict(min_runs=5, max_runs=30, budget_s=0.4)
    g = torch.Generator(device=dev).manual_seed(0)
    w = ExpertWeights.stack([quantize(torch.randn(n, k, generator=g, device=dev, dtype=torch.bfloat16))
                             for _ in range(e)])
    w_t = torch.randn(e, n, k, generator=g, device=dev, dtype=torch.bfloat16).transpose(1, 2)  # [E, K, N]
    rows = []
    for tokens in tokens_list:
        counts = routing(tokens, e, top, seed=tokens)
        t = int(counts.sum())
        offsets = counts.cumsum(0).to(torch.int32).to(dev)
        live = int((counts > 0).sum())
        nbytes = live * (n * k // 2 + n * k // 32)
        floor = _floor_us(timer, w, live * n, torch.empty(t, n, dtype=torch.bfloat16, device=dev), kw)
        params = plan.grouped_heuristic(t, e, n, k)
        for kind in data:
            a = activations(kind, t, k, tokens, g)
            out = grouped_gemm_a4w4(a, w, offsets)
            report = _check(out, a, w, counts.tolist(), t if tokens <= 128 else CHECK_ROWS)
            same = torch.equal(out, grouped_gemm_a4w4(a, w, offsets))
            ours = timer.time(lambda: grouped_gemm_a4w4(a, w, offsets), **kw).mean_us
            bf16 = timer.time(lambda: _bf16(a, w_t, offsets), **kw).mean_us
            rows.append(dict(shape=name, tokens=tokens, data=kind, rows=t, experts=live, us=ours, bf16_us=bf16,
                             ratio=ours / bf16, touched_bytes=nbytes, floor_us=floor,
                             path=f"{type(params).__name__} {params.tile}",
                             exact=report.passed, bitident=report.identical_fraction, deterministic=same))
            r = rows[-1]
            progress(f"{name} {tokens} tokens, {kind}: {ours:.1f} us, bf16 {bf16:.1f} us ({r['ratio']:.2f}x), "
                     f"{r['path']}, {report}")
    return rows


def _floor_us(timer: ColdTimer, w: ExpertWeights, rows: int, out: torch.Tensor, kw: dict) -> float:
    """The stream floor of ``rows`` weight rows' bytes (the touched experts' codes and scales, read from the
    stacked weight's first rows): the fastest of ``FLOOR_GRIDS`` CTA counts, writing C's bytes (``out``)."""
    from ..cuda import ops as cuda_ops

    data, scales = w.weight.data[:rows], w.weight.scales[:rows]
    return min(timer.time(lambda: cuda_ops.stream_floor(data, scales, out, c), **kw).mean_us
               for c in cuda_ops.FLOOR_GRIDS)


def report(rows: list[dict]) -> str:
    lines = ["| shape | tokens | data | rows | experts touched | ours us | bf16 _grouped_mm us | ratio | touched MB | "
             "floor us | x floor | path | bit-identical | exact, deterministic |", "|" + "---|" * 14]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['tokens']} | {r['data']} | {r['rows']} | {r['experts']} | {r['us']:.1f} | "
                     f"{r['bf16_us']:.1f} | {r['ratio']:.2f} | {r['touched_bytes'] / 1e6:.1f} | {r['floor_us']:.1f} | "
                     f"{r['us'] / r['floor_us']:.2f} | {r['path']} | {r['bitident']:.4%} | "
                     f"{r['exact'] and r['deterministic']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mxfp4.bench.moe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=(*DATA_SETS, "all"), default="randn",
                        help="the activations: randn (default), model-like, heavy-tailed, or all three")
    args = parser.parse_args(argv)
    if not (torch.cuda.is_available() and cuda_supported(torch.device("cuda"))):
        print("python -m mxfp4.bench.moe needs a Hopper GPU (the grouped kernel)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    rows = run(data=DATA_SETS if args.data == "all" else (args.data,))
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, {time.perf_counter() - start:.0f} s\n")
    print(report(rows))
    return 0 if all(r["exact"] and r["deterministic"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
