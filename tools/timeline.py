"""Where one call's time goes inside the kernels (GPU): per-program timestamps (%globaltimer,
ns) at the phase boundaries (and after each K step's dot) of the int8_fused and int8_meet
kernels and of the two launches of the int8 path (the A fold, then the multiply launched as its
programmatic dependent), with L2 flushed before each call, beside the call's event time (the
bench's rule) and cuBLAS bf16.

The library's kernel module is copied to a temporary file with stamp calls inserted after anchor
lines (each anchor must occur exactly once), so the library itself carries no tracing code. A
stamp waits for the values it names (a reduction over the program, then the timer read), so it
marks when the whole program has them; each costs a cross-warp reduction, so the traced launch
runs a little slower than the plain one (both are printed).

Usage (on the GPU box, from the repo root):
  PYTHONPATH=src python3 tools/timeline.py [--warm | --warm-sets S,..] [--int8] [--pdl N] [--config CFG] [M,N,K ...]
  (default: the six benchmark shapes)
--warm: after each flush, read A and the folded weight back into L2 (tools/warm_probe.py), so
the stamps show the chain on the chip without the operands' first trip from DRAM.
--warm-sets S1,S2,..: trace each shape once per set, each set a '+'-joined list of what is read
back into L2 after each flush: a (A), wq (the folded weight's values), wf (its factors and fold
flags), c (the output), or none; e.g. --warm-sets none,a,wq,wf,c,a+wq+wf.
--int8: run a shape whose table entry is int8_meet on the two-launch int8 path (same tiles).
--pdl N: set mxfp4.launch.INT8_PDL to N for the int8 path (0 plain launches, 1, 2).
--config CFG: trace this config (BM,BN,SPLIT,WARPS,STAGES,STEP,KERNEL as tools/config_ab.py takes it)
  instead of the table's, on every shape.
NAME=V (an int): set the knob mxfp4.launch.NAME to V for the run.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from mxfp4 import launch, ops, task, testing
from mxfp4.bench.timing import ColdTimer

from knob_ab import config_from_fields, hold_knobs
from warm_probe import _touch, folded_weight_parts, task_inputs, timed

SLOTS = 32
KERNELS = Path(__file__).resolve().parent.parent / "src" / "mxfp4" / "kernels"

STAMP = '''

@triton.jit
def _stamp(trace_ptr, slot, dep):
    """Write %globaltimer (ns) to trace[program, slot] once the whole program holds ``dep``."""
    if len(dep.shape) == 0:
        ready = dep.to(tl.int32)
    else:
        ready = tl.max(dep.to(tl.int32))
    t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [ready], dtype=tl.int64, is_pure=False,
                                  pack=1)
    pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    tl.store(trace_ptr + pid * {slots} + slot, t)
'''.format(slots=SLOTS)

# (module, kernel, [(anchor line, inserted lines)]): the inserted lines go right after the anchor.
# Fused slots: 0-4 the phases up to the first dot, 5-23 the K steps after it (23 also holds every
# step past the 20th), 24-26 the split-K store (STORE below), 29 A folded, 31 the end. The segment
# loop (kernels.fused._segment_loop: one pipelined loop of every step, facts before it) stamps 0,
# 30 when the loop is done, 3 and 31.
FUSED = ("fused", "a4w4_fused_kernel", [
    ("    pid = tl.program_id(0)\n", "    _stamp(trace_ptr, 0, pid)\n"),
    ("        xf0, bits0, amax0, e0, nonfinite0 = _scales(x0, BMQ, CB, FLOOR_RULE)\n",
     "        _stamp(trace_ptr, 1, amax0)\n"),
    ("        # Reduced here, not at their use, where the compiler would move both loads.\n"
     "        ok_w = all_fold(fw, ok_w)\n", "        _stamp(trace_ptr, 2, ok_w)\n"),
    ("BMQ, CB, FLOOR_RULE)\n    folded, ref = _fold_rule(hi, lo)\n", "    _stamp(trace_ptr, 3, hi)\n"),
    ("            q, _ = _fold_rounded(r0, e0, nonfinite0, folded, ref, BMQ, CB)\n",
     "            _stamp(trace_ptr, 29, q)\n"),
    ("            d = tl.dot(_repeat_rows(q.to(tl.int8), REP), tl.trans(w0), out_dtype=tl.int32)\n",
     "            _stamp(trace_ptr, 4, d)\n"),
    ("                    d = tl.dot(_repeat_rows(q.to(tl.int8), REP), tl.trans(w), d, out_dtype=tl.int32)\n",
     "                    _stamp(trace_ptr, tl.minimum(4 + (k0 - k_lo) // BK, 23), d)\n"),
    ("x_all, BM, BMQ, BN, BK, ALL, PACKED, W_TMA, FLOOR_RULE)\n", "        _stamp(trace_ptr, 30, d)\n"),
    ("                BM, BN, USE_SPLIT, REP, REDUCERS)\n", "    _stamp(trace_ptr, 31, pid)\n"),
])
FUSED_NAMES = {0: "start", 1: "A in", 2: "W flags", 3: "A facts", 4: "dot 1", 24: "part stored", 25: "arrived",
               26: "summed", 29: "A folded", 30: "loop done", 31: "end"}

# Helpers copied into the traced module with stamps, taking trace_ptr first: (module, function, anchors).
# The split-K store (a4w4._store_tile, a4w4._sum_partials): 24 once the partial's store is issued (not
# acknowledged), 25 once the tile counter's atomic has returned (after the release, which waits for the
# store), 26 (the programs that sum a tile) once their share of the partials is summed.
STORE = [("a4w4", "_store_tile", [
    ("                 mask=(local_m % REP == 0)[:, None])\n", "        _stamp(trace_ptr, 24, pid_k)\n"),
    ("        arrived = tl.atomic_add(tile_cnt_ptr + tile, 1, sem=\"acq_rel\", scope=\"gpu\")\n",
     "        _stamp(trace_ptr, 25, arrived)\n"),
]), ("a4w4", "_sum_partials", [
    ("    rows = row0 + first_row + tl.arange(0, PIECE_ROWS)\n", "    _stamp(trace_ptr, 26, summed)\n"),
])]

MEET = ("meet", "a4w4_meet_kernel", [
    ("    pid = tl.program_id(0)\n", "    _stamp(trace_ptr, 0, pid)\n"),
    ("                  unit // ROW_GROUPS, M, K, SEG_BLOCKS, NSEG, PM, CB, FLOOR_RULE, ONE_CHUNK)\n",
     "    _stamp(trace_ptr, 1, pid)\n"),
    ("    meet(sync_ptr, epoch, INTERPRET)\n", "    _stamp(trace_ptr, 2, pid)\n"),
    ("        _proxy_fence(pid)\n    for item in range(pid, items, G):\n", "        _stamp(trace_ptr, 29, item)\n"),
    ("                  FBN, GROUP_M, MODE, PACKED)\n", "        _stamp(trace_ptr, 31, pid)\n"),
])
MEET_NAMES = {0: "start", 1: "fold done", 2: "met", 27: "meet entry", 28: "arrived", 29: "items start", 31: "end",
              **{s: f"step {s - 2}" for s in range(3, 27)}}
# int8_meet's work items, copied from kernels/int8.py: slots 3-26 after each K step's dot (26 also
# holds every step past the 23rd; a program with several work items keeps its last one's); and the
# meeting (kernels/a4w4.meet): 27 on entry (after the writer's proxy fence), 28 once the arrival's
# atomic has returned; 29 (above) once the reader's proxy fence after the meeting is done.
MEET_HELPERS = [("int8", "int8_tile", []), ("int8", "_add_segment", []), ("int8", "_int8_sum", [
    ("            d = tl.dot(a_desc.load([row0, k0]), tl.trans(w_desc.load([col0, k0])), d, out_dtype=tl.int32)\n",
     "            _stamp(trace_ptr, tl.minimum(3 + (k0 - k_lo) // BK, 26), d)\n")]), ("a4w4", "meet", [
    ("    if not INTERPRET:\n        G = tl.num_programs(0)\n", "        _stamp(trace_ptr, 27, G)\n"),
    ("        seen = tl.atomic_add(counter, 1, sem=\"acq_rel\", scope=\"gpu\") + 1\n",
     "        _stamp(trace_ptr, 28, seen)\n")])]

# The int8 path's two launches, traced together (their stamps share the trace buffer: the fold's
# programs write slots 0-1, the multiply's 2-4, 5-30 (after each K step's dot; 30 also holds every
# step past the 26th) and 31, each under its own program index). The fourth element names the
# other functions of the module that take the trace; those named *_kernel are launched too.
INT8 = ("int8", "a4w4_int8_kernel", [
    ("    if PDL == 1:\n        gdc_launch_dependents()\n", "    _stamp(trace_ptr, 0, tl.program_id(0))\n"),
    ("    if PDL == 2:\n        gdc_launch_dependents()\n", "    _stamp(trace_ptr, 1, tl.program_id(0))\n"),
    ("    its first TMA loads need not fetch them (:func:`mxfp4.kernels.prefetch.prefetch_tensormaps`).\"\"\"\n",
     "    _stamp(trace_ptr, 2, tl.program_id(0))\n"),
    ("    if PDL:\n        gdc_wait()\n", "    _stamp(trace_ptr, 3, tl.program_id(0))\n"),
    ("        d = _int8_sum(a_desc, w_desc, wsh_ptr, row0, col0, offs_n, mask_n, K, 0, K, BM, BN, BK, PACKED)\n",
     "        _stamp(trace_ptr, 4, d)\n"),
    ("              BK, FBN, GROUP_M, MODE, PACKED)\n", "    _stamp(trace_ptr, 31, tl.program_id(0))\n"),
    ("            d = tl.dot(a_desc.load([row0, k0]), tl.trans(w_desc.load([col0, k0])), d, out_dtype=tl.int32)\n",
     "            _stamp(trace_ptr, tl.minimum(5 + (k0 - k_lo) // BK, 30), d)\n"),
], ("fold_a_kernel", "_fold_program", "int8_tile", "_add_segment", "_int8_sum"))
INT8_NAMES = {0: "fold start", 1: "fold done", 2: "mul start", 3: "mul waited", 4: "K loop done", 31: "mul end",
              **{s: f"step {s - 4}" for s in range(5, 31)}}
# the slot each slot's "from own start" column counts from (else slot 0)
INT8_OWN_START = {s: 2 for s in range(2, 32)}


def helpers_of(spec):
    """The helpers traced with the kernel of ``spec`` (see STORE and MEET_HELPERS)."""
    if spec is FUSED:
        return STORE
    return MEET_HELPERS if spec is MEET else ()


def threaded_of(spec):
    """The other functions of ``spec``'s module that take the trace (its fourth element, if any)."""
    return spec[3] if len(spec) > 3 else ()


def _stamped(src, where, anchors):
    for anchor, lines in anchors:
        if src.count(anchor) != 1:
            raise RuntimeError(f"anchor found {src.count(anchor)} times in {where}: {anchor!r}")
        src = src.replace(anchor, anchor + lines)
    return src


def _trace_last(src, kernel):
    """``src`` with ``trace_ptr=None`` added as the last parameter of the kernel ``kernel``."""
    found = re.search(rf"^def {kernel}\((.*?)\):\n", src, flags=re.M | re.S)
    if found is None:
        raise RuntimeError(f"no definition of {kernel}")
    return src[:found.end(1)] + ", trace_ptr=None" + src[found.end(1):]


def traced_kernel(spec, helpers=()):
    """The kernel of ``spec`` rebuilt from the library's source with the stamps inserted, taking
    the trace buffer as its last argument (``trace_ptr``); each of ``helpers`` (module, function,
    anchors) is copied into the rebuilt module with its stamps, taking the trace buffer first."""
    return getattr(traced_module(spec, helpers), spec[1])


def traced_module(spec, helpers=()):
    """The module of :func:`traced_kernel`, with every traced function of ``spec`` in it."""
    module, name, anchors = spec[:3]
    src = _stamped((KERNELS / f"{module}.py").read_text(), f"{module}.py", anchors)
    src = src.replace("from .", "from mxfp4.kernels.")
    for fn in (name, *threaded_of(spec)):
        if fn.endswith("_kernel"):  # a kernel takes the trace last, so its other parameters keep their PTX
            src = _trace_last(src, fn)  # names (a kernel's tensor-map prefetch names them)
        else:  # its definition and every call of it in the module
            src = re.sub(rf"\b{fn}\(", f"{fn}(trace_ptr, ", src)
    bodies = []
    for h_module, h_name, h_anchors in helpers:
        h_src = (KERNELS / f"{h_module}.py").read_text()
        start = h_src.index(f"@triton.jit\ndef {h_name}(")
        end = h_src.find("\n\n\n", start)
        bodies.append(_stamped(h_src[start:end if end > 0 else None], f"{h_module}.{h_name}", h_anchors))
        src = re.sub(rf"^from mxfp4\.kernels\.{h_module} import {h_name}\n", "", src, flags=re.M)
        src = re.sub(rf"^(from mxfp4\.kernels\.{h_module} import .*?)(, {h_name}\b|\b{h_name}, )", r"\1", src,
                     flags=re.M)  # the copy replaces it in an import of several names
        if re.search(rf"^from .* import .*\b{h_name}\b", src, flags=re.M):
            raise RuntimeError(f"{h_name} is imported in {module}.py in a form the tool does not take apart")
        # the copy runs in the rebuilt module: give it the names of its own module it uses
        src += (f"\n\nimport mxfp4.kernels.{h_module} as _from_{h_module}  # noqa: E402\n"
                f"globals().update({{k: v for k, v in vars(_from_{h_module}).items() if k not in globals()}})\n")
    src = "\n\n\n".join([src + STAMP, *bodies]) + "\n"
    for _, h_name, _ in helpers:  # the copies' definitions and every call of them take the trace first
        src = re.sub(rf"\b{h_name}\(", f"{h_name}(trace_ptr, ", src)  # not a4w4_meet_kernel( for meet(
    path = Path(tempfile.mkdtemp()) / f"traced_{module}.py"
    path.write_text(src)
    mod_spec = importlib.util.spec_from_file_location(f"traced_{module}", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


class _WithTrace:
    """Stands in for a kernel in its module: launches ``kernel`` with ``trace`` as trace_ptr."""

    def __init__(self, kernel, trace):
        self.kernel, self.trace, self.grid = kernel, trace, None

    def __getitem__(self, grid):
        self.grid = grid
        return lambda *args, **kwargs: self.kernel[grid](*args, trace_ptr=self.trace, **kwargs)


WARM_PARTS = ("a", "wq", "wf", "c")


def warm_tensors(parts, a, w, out):
    """The tensors that the set ``parts`` (of WARM_PARTS) names: A, the folded weight's values,
    its factors and flags (:func:`warm_probe.folded_weight_parts`), the output."""
    values, factors = folded_weight_parts(w)
    named = {"a": [a], "wq": values, "wf": factors, "c": [out]}
    return [t for part in parts for t in named[part]]


def timeline(m, n, k, timer, runs=20, warm=(), int8=False, config=None):
    a, b, w, out = task_inputs(m, n, k, m + n + k)
    cfg = config or ops.resolve_config(m, n, k, torch.device("cuda"))
    if int8 and cfg.kernel == "int8_meet":
        cfg = dataclasses.replace(cfg, kernel="int8")
    if cfg.kernel not in ("int8_fused", "int8_meet", "int8"):
        print(f"{m}x{n}x{k}: kernel {cfg.kernel} is not traced")
        return
    spec, names, own_start = {"int8_fused": (FUSED, FUSED_NAMES, {}), "int8_meet": (MEET, MEET_NAMES, {}),
                              "int8": (INT8, INT8_NAMES, INT8_OWN_START)}[cfg.kernel]
    module = importlib.import_module(f"mxfp4.kernels.{spec[0]}")
    kernels = [spec[1], *(f for f in threaded_of(spec) if f.endswith("_kernel"))]
    plain = {name: getattr(module, name) for name in kernels}
    call = lambda: launch.launch_a4w4(a, w, out, cfg)  # noqa: E731
    call()
    sink = torch.zeros((), dtype=torch.int64, device="cuda")
    ours = warm_tensors(warm, a, w, out)
    theirs = [t for part, t in (("a", a), ("wq", b)) if part in warm]  # cuBLAS: A and its bf16 weight
    plain_us = timed(timer, call, ours, sink)
    cublas_us = timed(timer, lambda: a @ b.T, theirs, sink)
    trace = torch.zeros(4096 * SLOTS, dtype=torch.int64, device="cuda")
    traced = traced_module(spec, helpers_of(spec))
    stand_ins = {name: _WithTrace(getattr(traced, name), trace) for name in kernels}
    for name in kernels:
        setattr(module, name, stand_ins[name])
    try:
        out.fill_(float("nan"))
        call()
        exact = testing.check_gemm(out, a, w, testing.sample_rows(m, limit=0)).passed
        traced_us = timed(timer, call, ours, sink)
        grid = max(math.prod(s.grid) for s in stand_ins.values())
        if grid > 4096:
            raise RuntimeError(f"{grid} programs: the trace holds 4096")
        per_run = []
        for _ in range(runs):
            trace.zero_()
            torch.cuda.synchronize()
            timer.flush()
            _touch(ours, sink)
            call()
            torch.cuda.synchronize()
            per_run.append(trace[:grid * SLOTS].view(grid, SLOTS).cpu())
    finally:
        for name in kernels:
            setattr(module, name, plain[name])
    tag = f"{m}x{n}x{k} {cfg.kernel} {cfg.block_m}x{cfg.block_n} s{cfg.split_k} b{cfg.blocks_per_step}"
    tag += f" st{cfg.num_stages} w{cfg.num_warps}"
    tag += f" PDL {launch.INT8_PDL}" if cfg.kernel == "int8" else ""
    tag += f" (warm in L2: {'+'.join(warm)})" if warm else ""
    grids = ", ".join(f"{name} {math.prod(s.grid)}" for name, s in stand_ins.items())
    print(f"\n{tag}: programs {grids}; event time plain {plain_us:.2f} us, traced {traced_us:.2f}, "
          f"cuBLAS bf16 {cublas_us:.2f}; traced output exact: {exact}")
    print("  slot            from the first program's start (us): min / median / max over programs | from own "
          "start: median")
    used = sorted({s for t in per_run for s in range(SLOTS) if bool((t[:, s] != 0).any())})
    firsts = [t[t[:, 0] != 0, 0].min() for t in per_run]  # each run's first program start
    for s in used:
        rel_first, rel_own = [], []
        own = own_start.get(s, 0)
        for t, t0 in zip(per_run, firsts):
            live = t[:, s] != 0
            rel_first.append(((t[live, s] - t0).double() / 1e3))
            rel_own.append(((t[live, s] - t[live, own]).double() / 1e3))
        first = torch.cat(rel_first)
        med_min = statistics.median(float(r.min()) for r in rel_first)  # per run, then the runs' median
        med_max = statistics.median(float(r.max()) for r in rel_first)
        name = names.get(s, f"step {s - 3}")
        own_median = float(torch.cat(rel_own).median())
        print(f"  {s:>2} {name:<12} {med_min:8.2f} / {float(first.median()):8.2f} / {med_max:8.2f} | {own_median:8.2f}")
    spans = [float((t[:, 31].max() - t0) / 1e3) for t, t0 in zip(per_run, firsts)]
    ticks = torch.cat([t[t != 0] for t in per_run]).sort().values.diff()
    ticks = ticks[ticks > 0]
    print(f"  span first start -> last end: median {statistics.median(spans):.2f} us over {runs} runs; "
          f"event time minus span {traced_us - statistics.median(spans):.2f} us; timer resolution: the "
          f"smallest step between stamps is {int(ticks.min()) if len(ticks) else 0} ns")


def main(argv):
    timer = ColdTimer("cuda")
    sets = [("a", "wq", "wf")] if "--warm" in argv else [()]
    int8 = "--int8" in argv
    if "--pdl" in argv:
        at = argv.index("--pdl")
        launch.INT8_PDL = int(argv[at + 1])
        del argv[at:at + 2]
    if "--warm-sets" in argv:
        at = argv.index("--warm-sets")
        sets = [() if s == "none" else tuple(s.split("+")) for s in argv[at + 1].split(",")]
        del argv[at:at + 2]
        unknown = {p for parts in sets for p in parts} - set(WARM_PARTS)
        if unknown:
            raise SystemExit(f"--warm-sets: unknown part(s) {sorted(unknown)}; want {', '.join(WARM_PARTS)} or none")
    config = None
    if "--config" in argv:
        at = argv.index("--config")
        config = config_from_fields(argv[at + 1].split(","))
        del argv[at:at + 2]
    argv = [s for s in hold_knobs(argv) if s not in ("--warm", "--int8")]
    shapes = [tuple(map(int, s.split(","))) for s in argv] or [s[:3] for s in task.BENCHMARK_SHAPES]
    for m, n, k in shapes:
        for parts in sets:
            timeline(m, n, k, timer, warm=parts, int8=int8, config=config)


if __name__ == "__main__":
    main(sys.argv[1:])
