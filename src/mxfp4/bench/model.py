"""Whole-model benchmark: greedy generation of a Llama-style decoder, bf16 against MXFP4 W4A4.

``mxfp4 bench-model``: builds :mod:`mxfp4.bench.llama` (random weights, bf16), generates with the
bf16 model (eager, CUDA graph of the decode step), then swaps its linear layers for MXFP4 with
:func:`mxfp4.quantize_` (all but the output head) and generates eager, with
``torch.compile(fullgraph=True)`` of the decode step, and with a CUDA graph of it. Per run: decode
tokens/s, weight bytes, peak memory, whether the tokens equal the eager run's. Then exactness: every
MXFP4 layer's output in one prefill and one decode step against the float64 oracle
(:func:`mxfp4.testing.check_gemm`, the stated bound), and the logits against the same model whose
layers run the exact reference (``mxfp4.reference``): the fraction bit-identical and the largest
difference. ``--tiny`` runs the test-sized model (on the CPU where there is no GPU, without graphs).
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import pathlib
import time

import torch

from .. import reference, testing
from ..convert import quantize_
from ..nn import MXFP4Linear, default_filter
from . import checkpoint as bench_checkpoint
from . import llama

COLUMNS = ("model", "mode", "batch", "prompt", "new_tokens", "tokens_per_s", "ms_per_step", "weight_bytes",
           "peak_bytes", "tokens_equal_eager", "compile_s")


@dataclasses.dataclass
class Run:
    model: str
    mode: str
    tokens: torch.Tensor
    seconds: float
    weight_bytes: int
    peak_bytes: int
    compile_s: float = 0.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of parameters and persistent buffers (the KV cache and rotary tables excluded)."""
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def _stepper(model: llama.Decoder, mode: str, batch: int, device: torch.device):
    """(step(ids [B, 1], pos [1]) -> logits [B, vocab], seconds spent compiling or capturing)."""
    if mode == "eager":
        return model.step, 0.0
    start = time.perf_counter()
    if mode == "compile":
        step = torch.compile(model.step, fullgraph=True)
        step(torch.zeros(batch, 1, dtype=torch.long, device=device), torch.zeros(1, dtype=torch.long, device=device))
        _sync(device)
        return step, time.perf_counter() - start
    # graph: one captured decode step; inputs copied into its static tensors, logits read from its output
    ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
    pos = torch.zeros(1, dtype=torch.long, device=device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(3):
            model.step(ids, pos)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.step(ids, pos)

    def replay(new_ids, new_pos):
        ids.copy_(new_ids)
        pos.copy_(new_pos)
        graph.replay()
        return out

    _sync(device)
    return replay, time.perf_counter() - start


@torch.no_grad()
def generate(model: llama.Decoder, prompt: torch.Tensor, new_tokens: int, step) -> tuple[torch.Tensor, float]:
    """Greedy: prefill eager, then ``new_tokens - 1`` decode steps; (tokens [B, new_tokens], decode seconds)."""
    device = prompt.device
    p = prompt.shape[1]
    logits = model(prompt, torch.arange(p, device=device))[:, -1]
    tokens = [logits.argmax(-1, keepdim=True)]
    positions = [torch.tensor([i], device=device) for i in range(p, p + new_tokens - 1)]  # own storage each
    _sync(device)
    start = time.perf_counter()
    for pos in positions:
        logits = step(tokens[-1], pos)
        tokens.append(logits.argmax(-1, keepdim=True))
    _sync(device)
    return torch.cat(tokens, dim=1), time.perf_counter() - start


@torch.no_grad()
def _run(name: str, mode: str, model, prompt, new_tokens: int) -> Run:
    device = prompt.device
    step, setup_s = _stepper(model, mode, prompt.shape[0], device)
    generate(model, prompt, min(4, new_tokens), step)  # warm-up (kernels compiled, caches filled)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    tokens, seconds = generate(model, prompt, new_tokens, step)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    return Run(name, mode, tokens, seconds, weight_bytes(model), peak, setup_s)


def _reference_forward(layer: MXFP4Linear):
    def forward(x: torch.Tensor) -> torch.Tensor:
        y = reference.gemm_a4w4(x, layer.weight, scale_rule=layer.scale_rule)
        return y + layer.bias if layer.bias is not None else y
    return forward


@contextlib.contextmanager
def reference_linears(model: torch.nn.Module):
    """Every MXFP4Linear of ``model`` runs the exact reference (``mxfp4.reference.gemm_a4w4``) inside."""
    layers = [m for m in model.modules() if isinstance(m, MXFP4Linear)]
    for m in layers:
        m.forward = _reference_forward(m)  # an instance attribute shadows the class's forward
    try:
        yield
    finally:
        for m in layers:
            del m.forward


@torch.no_grad()
def exactness(model: llama.Decoder, prompt: torch.Tensor) -> dict:
    """Each MXFP4 layer's output in a prefill of ``prompt`` and one decode step against the oracle, and the
    logits against the reference path's."""
    device, p = prompt.device, prompt.shape[1]
    seen = []
    hooks = [m.register_forward_hook(lambda m, args, out: seen.append((m, args[0], out)))
             for m in model.modules() if isinstance(m, MXFP4Linear)]
    try:
        prefill = model(prompt, torch.arange(p, device=device))
        step = model.step(prefill[:, -1].argmax(-1, keepdim=True), torch.tensor([p], device=device))
    finally:
        for h in hooks:
            h.remove()
    violations = nonfinite = 0
    identical = total = 0
    for m, x, out in seen:
        if m.bias is not None:
            continue  # the oracle is of the product; this decoder's projections have no bias
        x2 = x.reshape(-1, x.shape[-1])
        r = testing.check_gemm(out.reshape(-1, out.shape[-1]), x2, m.weight, testing.sample_rows(x2.shape[0]))
        violations += r.violations
        nonfinite += r.nonfinite_mismatch
        identical += round(r.identical_fraction * r.elements)
        total += r.elements
    with reference_linears(model):
        ref_prefill = model(prompt, torch.arange(p, device=device))
        ref_step = model.step(prefill[:, -1].argmax(-1, keepdim=True), torch.tensor([p], device=device))
    got, want = torch.cat((prefill[:, -1], step), 0).float(), torch.cat((ref_prefill[:, -1], ref_step), 0).float()
    return {"gemm_outputs": total, "gemm_bitident": identical / max(total, 1), "gemm_violations": violations,
            "gemm_nonfinite_mismatch": nonfinite, "logits_bitident": float((got == want).float().mean()),
            "logits_max_abs_diff": float((got - want).abs().max())}


def run(shape: llama.LlamaShape, batch: int, prompt_len: int, new_tokens: int, device: str,
        record: pathlib.Path | None = None, modes: tuple[str, ...] | None = None, progress=print,
        checkpoint: pathlib.Path | None = None) -> str:
    """Benchmarks bf16 then MXFP4 generation; returns the report (markdown) and appends rows to ``record``.
    With ``checkpoint`` (written by :func:`mxfp4.bench.checkpoint.make`): the MXFP4 model only, built on
    meta and loaded from it (its shape, not ``shape``)."""
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if min(batch, prompt_len, new_tokens) < 1:
        raise ValueError(f"batch, prompt and new_tokens must be positive, got {batch}, {prompt_len}, {new_tokens}")
    max_seq = -(-(prompt_len + new_tokens) // 64) * 64  # the cache holds them all
    if shape.experts and modes and "compile" in modes:
        raise ValueError("--modes compile: the MXFP4 experts' grouped GEMM is not a torch op, so "
                         "torch.compile(fullgraph=True) cannot trace a mixture-of-experts model (eager and graph run)")
    modes = modes or (("eager",) if shape.experts else ("eager", "compile")) + (("graph",) if cuda else ())
    runs, loaded = [], ""
    if checkpoint is None:
        shape = dataclasses.replace(shape, max_seq=max_seq)
        model = llama.build(shape, batch, dev)
    else:
        model, loaded = bench_checkpoint.load(checkpoint, batch, max_seq, device)
        shape = model.s
        progress(loaded)
    prompt = torch.randint(0, shape.vocab, (batch, prompt_len), generator=torch.Generator().manual_seed(1)).to(dev)
    for mode in [m for m in modes if m != "compile" and checkpoint is None]:  # bf16: eager and graph
        runs.append(_run("bf16", mode, model, prompt, new_tokens))
        progress(f"bf16 {mode}: {_rate(runs[-1]):.1f} tok/s")
    if checkpoint is None:
        quantize_(model, _quantized)
    if cuda:
        torch.cuda.empty_cache()
    for mode in modes:
        runs.append(_run("mxfp4", mode, model, prompt, new_tokens))
        progress(f"mxfp4 {mode}: {_rate(runs[-1]):.1f} tok/s")
    check = exactness(model, prompt[:, : min(prompt_len, 16)])
    eager = {r.model: r.tokens for r in runs if r.mode == "eager"}
    rows = [{"model": r.model, "mode": r.mode, "batch": batch, "prompt": prompt_len, "new_tokens": new_tokens,
             "tokens_per_s": round(_rate(r), 2), "ms_per_step": round(r.seconds / max(new_tokens - 1, 1) * 1e3, 3),
             "weight_bytes": r.weight_bytes, "peak_bytes": r.peak_bytes,
             "tokens_equal_eager": bool(torch.equal(r.tokens, eager[r.model])) if r.model in eager else "",
             "compile_s": round(r.compile_s, 2)} for r in runs]
    if record is not None:
        new = not record.exists()
        record.parent.mkdir(parents=True, exist_ok=True)
        with open(record, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS + ("device", "shape"))
            if new:
                writer.writeheader()
            name = torch.cuda.get_device_name(dev) if cuda else "cpu"
            for row in rows:
                writer.writerow({**row, "device": name, "shape": _label(shape)})
    text = report(shape, rows, check, "cuda: " + torch.cuda.get_device_name(dev) if cuda else "cpu")
    return f"{text}\n{loaded}" if loaded else text


def _quantized(module: torch.nn.Module, name: str) -> bool:
    """The layers the bench quantizes: ``quantize_``'s default except the routers of a mixture of experts
    (``mlp.gate``), which stay bf16 as Quark's exports keep them."""
    return default_filter(module, name) and not name.endswith("mlp.gate")


def _rate(r: Run) -> float:
    return r.tokens.shape[0] * (r.tokens.shape[1] - 1) / r.seconds if r.seconds > 0 else float("inf")


def _label(s: llama.LlamaShape) -> str:
    mlp = (f"{s.experts} experts of {s.expert_intermediate} (top {s.top_k})" if s.experts
           else f"intermediate {s.intermediate}")
    return f"hidden {s.hidden}, {s.layers} layers, {mlp}, vocab {s.vocab}"


COMPILE_NOTE = ("tokens = eager False under compile: torch.compile fuses and reorders the bf16 operations between "
                "the MXFP4 layers (norms, rotary, residual adds), and quantizing the next layer's input to 4 bits "
                "turns their last-bit differences into other codes, so its logits differ from eager's and greedy "
                "tokens can part; each MXFP4 GEMM is the same op in both modes")
"""Printed under the table when a compiled run's tokens differ from eager's."""


def report(shape: llama.LlamaShape, rows: list[dict], check: dict, device: str) -> str:
    kind = "mixture-of-experts" if shape.experts else "Llama-style"
    lines = [f"{kind} decoder ({_label(shape)}), {device}", "",
             "| model | mode | tok/s | ms/step | weights MiB | peak MiB | tokens = eager | compile/capture s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['mode']} | {r['tokens_per_s']:.1f} | {r['ms_per_step']:.2f} | "
                     f"{r['weight_bytes'] / 2**20:.0f} | {r['peak_bytes'] / 2**20:.0f} | {r['tokens_equal_eager']} | "
                     f"{r['compile_s']:.1f} |")
    if any(r["mode"] == "compile" and r["tokens_equal_eager"] is False for r in rows):
        lines += ["", COMPILE_NOTE]
    which = "MXFP4 linear layers (attention; the experts are checked by the grouped GEMM's tests)" if shape.experts \
        else "MXFP4 layers"
    lines += ["", f"{which} vs the float64 oracle: {check['gemm_outputs']} outputs, "
              f"{check['gemm_bitident']:.4%} bit-identical, {check['gemm_violations']} outside the stated bound, "
              f"{check['gemm_nonfinite_mismatch']} NaN/Inf mismatches",
              f"logits vs the reference path: {check['logits_bitident']:.4%} bit-identical, "
              f"max |diff| {check['logits_max_abs_diff']:.3g}"]
    return "\n".join(lines)
