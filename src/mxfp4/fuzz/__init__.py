"""Seeded differential fuzzing of every entry point against an independent exact oracle.

``mxfp4 fuzz --cases N --seed S [--backend auto|cuda|reference]``: case ``i`` of seed ``S`` is
drawn from ``random.Random(f"{S}:{i}")`` alone, so ``mxfp4 fuzz --seed S --case i`` replays it.
A case picks an entry point (``gemm_a4w4`` with or without ``out=`` / forced kernel variant,
``MXFP4Linear``, ``torch.ops.mxfp4.gemm_a4w4``, ``task.custom_kernel``, ``quantize``), a bias for a
quarter of the cases that take one (the oracle adds it as one more exact term; on the kernels the
bound grows by one float32 rounding of the biased total, ``testing.biased_bound``), a layout,
an activation dtype, a scale rule, odd shapes, and values block by block over the whole input range
(subnormals to the largest finite, exact e2m1 midpoints, scale-rounding boundaries, zeros, NaN/Inf,
saturation, and blocks that cancel far above the result).

The oracle shares nothing with ``reference.py`` or ``formats.py`` (but ``unpack_codes``, to read
packed bytes): it quantizes with frexp and a nearest-value search, sums each block's doubled codes
as exact integers, adds the block terms ``s * 2**(ea + ew - 2)`` in int64 limbs of 24 bits (exact
over the whole e8m0 range) and rounds once to bf16. The contract checked (README, docs/design.md):

* quantize / dequantize: bit-exact.
* reference backend: bit-exact, NaN exactly where a block of the row or column has the NaN scale.
* CUDA kernel: within ``ulp_bf16(exact) + (K/32) * 2**-24 * sum|a w|`` (adding the K/32 exact block
  products in float32), NaN/Inf exactly where the exact
  product rounded to bf16 has them, for outputs whose blocks all have ``-147 <= ea + ew <= 112``
  (the kernel's stated domain, docs/design.md). Deviations outside that domain are counted
  and listed, not failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time

import torch

from .. import formats  # unpack_codes only: reading the library's packed bytes
from .cases import Case, draw_case, make_bias, make_operands
from .grouped import run_grouped
from .oracle import oracle_gemm, oracle_quantize, oracle_values
from .verdict import Result, case_generator, compare


# ---- running a case -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _shipped_variants():
    """The bf16-output GEMM variants ``mxfp4 compile`` builds, every kernel but the grouped ones: the
    forced-variant entry takes no other."""
    from .. import plan
    from ..bench.shapes import shape_set

    return sorted((p for p in plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
                   if isinstance(p, plan.KERNEL_PARAMS) and not p.out_f32), key=str)


def _kernel_accepts(case: Case) -> bool:
    return case.dtype == "bf16" and case.shuffled and not case.floor_rule


def gemm_params_variant(case: Case):
    """The shipped variant the ``gemm_params`` entry runs ``case`` on: those that fit the problem the kernels
    see (N and K padded to the layout's 16 rows and 64 elements), taken in turn by the case's index."""
    from .. import plan

    problem = plan.Problem(int(torch.Size(case.lead).numel()), -(-case.n // 16) * 16, -(-case.k // 64) * 64)
    fits = [p for p in _shipped_variants() if p.fits(problem)]
    return fits[case.index % len(fits)]


def run_case(case: Case, backend: str, device: torch.device) -> Result:
    """Runs ``case`` through its entry point on ``backend`` ('cuda' or 'reference') and checks it."""
    import mxfp4
    from .. import task
    from ..nn import MXFP4Linear
    from ..tensor import Layout

    if case.entry == "grouped":
        return run_grouped(case, backend, device)
    g = case_generator(case)
    a, b = make_operands(case, g)
    bias = make_bias(case, g) if case.bias else None
    rule = mxfp4.ScaleRule.FLOOR if case.floor_rule else mxfp4.ScaleRule.AITER
    res = Result()
    if case.entry == "quantize":
        return _check_quantize(case, a, rule, device, res)

    entry, call_backend = case.entry, backend
    if backend == "cuda" and not _kernel_accepts(case):
        entry, call_backend, res.on_reference = "gemm", "reference", True
    if entry == "task" and not (case.shuffled and case.dtype == "bf16" and not case.floor_rule):
        entry = "gemm"

    if entry == "from_linear":
        lin = torch.nn.Linear(case.k, case.n, bias=False, dtype=b.dtype)
        with torch.no_grad():
            lin.weight.copy_(b)
        layer = MXFP4Linear.from_linear(lin.to(device), rule)
        w = layer.weight
        made_by = "MXFP4Linear.from_linear"
    else:
        w = mxfp4.quantize(b.to(device), rule)
        if case.shuffled:
            w = mxfp4.prepare(w)
        made_by = "quantize"
    # the weight's bytes (the quantize kernel's on a GPU), checked in every GEMM case
    want_codes, want_scales = oracle_quantize(b, case.floor_rule)
    plain = w.to_layout(Layout.PLAIN)
    w_codes, w_scales = formats.unpack_codes(plain.data).cpu(), plain.scales.cpu()
    if not (torch.equal(w_codes, want_codes) and torch.equal(w_scales, want_scales)):
        res.failures.append(f"{made_by}: weight bytes differ from the oracle's quantization")

    a_dev = a.to(device)
    if case.strided:  # a column slice of a wider buffer: row stride K + 32, 16-byte aligned or not
        wide = torch.zeros(*a.shape[:-1], case.k + 32, dtype=a.dtype, device=device)
        start = 16 if case.index % 2 else 1
        wide[..., start:start + case.k] = a_dev
        a_dev = wide[..., start:start + case.k]
    out_shape = (*case.lead, case.n)
    if device.type == "cuda":  # poison the block torch.empty will hand out next
        torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device=device)
    b_dev = None if bias is None else bias.to(device)
    if entry == "gemm":
        out = mxfp4.gemm_a4w4(a_dev, w, backend=call_backend, bias=b_dev)
    elif entry == "gemm_out":
        out = torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device=device)
        if mxfp4.gemm_a4w4(a_dev, w, out, backend=call_backend, bias=b_dev) is not out:
            res.failures.append("gemm_a4w4(out=...) did not return out")
    elif entry == "gemm_params":
        params = gemm_params_variant(case) if call_backend == "cuda" else None
        out = mxfp4.gemm_a4w4(a_dev, w, backend=call_backend, params=params)
    elif entry in ("linear", "from_linear"):
        layer = layer if entry == "from_linear" else MXFP4Linear.from_mxfp4(w, b_dev)
        out = layer(a_dev)
    elif entry == "op":
        out = torch.ops.mxfp4.gemm_a4w4(a_dev, w.data, w.scales, case.n, case.k, w.layout is Layout.AITER_SHUFFLED,
                                        case.floor_rule, bias=b_dev)
    else:
        out = task.custom_kernel((a_dev, None, None, w.data, w.scales))
    if tuple(out.shape) != out_shape or out.dtype != torch.bfloat16:
        res.failures.append(f"output is {out.dtype} {tuple(out.shape)}, want bfloat16 {out_shape}")
        return res

    a_codes, a_scales = oracle_quantize(a.reshape(-1, case.k), case.floor_rule)
    exact = oracle_gemm(a_codes, a_scales, w_codes, w_scales, bias)  # the product of the weight as quantized
    on_cuda = call_backend == "cuda" or (backend == "cuda" and entry in ("linear", "from_linear", "op", "task"))
    return compare(out.reshape(-1, case.n).cpu(), exact, case.k, on_cuda, res, bias is not None)


def _check_quantize(case: Case, x: torch.Tensor, rule, device: torch.device, res: Result) -> Result:
    import mxfp4

    q = mxfp4.quantize(x.to(device), rule)
    codes, scales = oracle_quantize(x, case.floor_rule)
    got_codes, got_scales = formats.unpack_codes(q.data).cpu(), q.scales.cpu()
    res.elements += x.numel()
    res.identical += int((got_codes == codes).sum())
    if not torch.equal(got_codes, codes) or not torch.equal(got_scales, scales):
        bad = (got_codes != codes).reshape(-1, case.k).nonzero()
        where = f"first code [{bad[0, 0].item()}, {bad[0, 1].item()}]" if len(bad) else "scales only"
        res.failures.append(f"quantize: {int((got_codes != codes).sum())} codes, "
                            f"{int((got_scales != scales).sum())} scale bytes differ; {where}")
    want = oracle_values(codes, scales)
    forms = [q]
    if len(case.lead) == 1 and case.n and case.lead[0] % 16 == 0 and case.k % 64 == 0:
        forms.append(mxfp4.prepare(q))
    for t in forms:
        got = mxfp4.dequantize(t, torch.float64).cpu()
        if not torch.equal(torch.isnan(got), torch.isnan(want)) or not torch.equal(got.nan_to_num(), want.nan_to_num()):
            res.failures.append(f"dequantize ({t.layout.name}, float64) differs from the oracle's values")
    return res


# ---- the command ----------------------------------------------------------------------------------

def reproducer(case: Case, backend: str) -> str:
    return (f"mxfp4 fuzz --seed {case.seed} --case {case.index} --backend {backend}"
            f"{' --large-m' if case.large_m else ''}{' --grouped' if case.entry == 'grouped' else ''}")


def resolve(backend: str) -> tuple[str, torch.device]:
    """('cuda' | 'reference', device) for ``--backend``; 'auto' takes the kernels on a Hopper GPU."""
    from ..device import cuda_supported

    hopper = torch.cuda.is_available() and cuda_supported(torch.device("cuda"))
    if backend == "cuda" and not hopper:
        raise ValueError("--backend cuda needs a Hopper GPU (sm_90)")
    if backend == "cuda" or (backend == "auto" and hopper):
        return "cuda", torch.device("cuda")
    return "reference", torch.device("cpu")


@dataclasses.dataclass
class Totals:
    cases: int = 0
    elements: int = 0
    identical: int = 0
    failed_cases: int = 0
    outside_domain: int = 0
    on_reference: int = 0
    lines: list = dataclasses.field(default_factory=list)
    deviation_lines: list = dataclasses.field(default_factory=list)


def run(seed: int, indices, backend: str, device: torch.device, verbose: bool = False,
        large_m: bool = False, grouped: bool = False) -> Totals:
    t = Totals()
    for i in indices:
        case = draw_case(seed, i, large_m, grouped)
        try:
            r = run_case(case, backend, device)
        except Exception as e:  # an entry point raising on a valid input is a failure too
            r = Result(failures=[f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"])
        t.cases += 1
        t.elements += r.elements
        t.identical += r.identical
        t.outside_domain += r.outside_domain
        t.on_reference += r.on_reference
        if r.failures:
            t.failed_cases += 1
            t.lines.append(f"{reproducer(case, backend)}  # {case.describe()}: {'; '.join(r.failures)}")
        if r.deviations:
            t.deviation_lines.append(f"{reproducer(case, backend)}  # {case.describe()}: {'; '.join(r.deviations)}")
        if verbose:
            print(f"case {i}: {case.describe()}{' (on reference)' if r.on_reference else ''}: {r.elements} elements, "
                  f"{r.identical} identical, {r.outside_domain} outside the domain "
                  f"{'; '.join(r.deviations)}, {'FAILED ' + '; '.join(r.failures) if r.failures else 'ok'}")
    return t


def _worker(job):
    seed, indices, backend, device, large_m, grouped = job
    torch.set_num_threads(1)
    return run(seed, indices, backend, torch.device(device), large_m=large_m, grouped=grouped)


_CHUNK = 250
"""Cases a worker runs between progress lines."""


def fuzz(cases: int, seed: int, backend: str = "auto", case: int | None = None, jobs: int = 1,
         out=None, large_m: bool = False, grouped: bool = False) -> int:
    """Runs the cases, prints the failures (one reproducer a line) and the counts; returns 1 on failure.
    ``jobs`` 0: the CPUs less one, at most 16 (the host side, case generation and the oracle, is the
    cost). Past ``_CHUNK`` cases a progress line goes to stderr every ``_CHUNK`` cases finished.
    ``large_m``: every case drawn for the large-M kernel; ``grouped``: every case a grouped GEMM of a mixture
    of experts (see ``draw_case``)."""
    import os

    out = out or sys.stdout
    chosen, device = resolve(backend)
    if jobs <= 0:
        jobs = max(1, min(16, (os.cpu_count() or 2) - 1))
    jobs = min(jobs, max(cases, 1))
    start = time.perf_counter()
    if case is not None:
        t = run(seed, [case], chosen, device, verbose=True, large_m=large_m, grouped=grouped)
    else:
        ranges = [range(s, min(s + _CHUNK, cases)) for s in range(0, cases, _CHUNK)]
        t = Totals()
        if jobs > 1:
            import multiprocessing as mp

            pool = mp.get_context("spawn").Pool(jobs)
            parts = pool.imap_unordered(_worker, [(seed, r, chosen, str(device), large_m, grouped) for r in ranges])
        else:
            pool, parts = None, (run(seed, r, chosen, device, large_m=large_m, grouped=grouped) for r in ranges)
        try:
            for part in parts:
                for f in dataclasses.fields(Totals):
                    setattr(t, f.name, getattr(t, f.name) + getattr(part, f.name))
                if len(ranges) > 1:
                    print(f"mxfp4 fuzz: {t.cases} of {cases} cases, {t.failed_cases} failed, "
                          f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        finally:
            if pool is not None:
                pool.terminate()
    for line in t.lines:
        print(line, file=out)
    if t.deviation_lines:
        print(f"{len(t.deviation_lines)} cases deviate outside the stated domain (not failures; first 10):", file=out)
        for line in t.deviation_lines[:10]:
            print(f"  {line}", file=out)
    where = "CUDA kernels" if chosen == "cuda" else "reference"
    drawn = " drawn for the large-M kernel" if large_m else " of grouped GEMMs" if grouped else ""
    print(f"mxfp4 fuzz seed {seed} on the {where} ({device}): {t.cases} cases{drawn} "
          f"({t.on_reference} that the kernel does not take ran on the reference), {t.elements} elements, "
          f"{100.0 * t.identical / max(t.elements, 1):.4f}% bit-identical to the exact result rounded to bf16, "
          f"{t.outside_domain} outputs off the contract outside its stated domain, {t.failed_cases} failed cases "
          f"in {time.perf_counter() - start:.1f} s", file=out)
    return 1 if t.failed_cases else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .. import plan

    p.add_argument("--cases", type=int, default=2000, help="number of cases (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=("auto", "cuda", "reference"), default="auto")
    p.add_argument("--case", type=int, help="replay one case of the seed, verbosely")
    p.add_argument("--jobs", type=int, default=0,
                   help="worker processes, each with its own CUDA context (default: the CPUs less one, at most 16)")
    p.add_argument("--large-m", action="store_true",
                   help=f"draw every case for the large-M kernel (M >= {plan.WGMMA_MIN_M}, shuffled bf16, "
                        "each GEMM entry point)")
    p.add_argument("--grouped", action="store_true",
                   help="draw every case a grouped GEMM of a mixture of experts (grouped_gemm_a4w4: experts of 0 to "
                        "140 rows, each grouped kernel forced or the heuristic's, a bias [E, N] for a quarter)")
