"""Benchmark providers: this library, cuBLAS bf16, cuBLAS fp8 rowwise, the torch emulation, the
one-launch streaming-floor probe, and two references that time cuBLAS's 8-bit GEMM alone, each
built once per shape into a zero-argument callable.

Everything a provider prepares once (weight casts, fp8 weight quantization, dequantized weights)
happens in ``build``, outside the timed call; what a real layer would do per call (quantizing A)
happens inside it, except in the two GEMM-alone references (``cublas_fp8_gemm``,
``cublas_int8_gemm``), whose A is quantized in ``build``: they bound what the vendor's 8-bit
GEMM takes on the shape when it is given its operands ready, with none of the work this
library's call does on A.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch

from .. import ops, task
from ..tensor import dequantize, quantize

FP8_MAX = 448.0
"""Largest finite float8_e4m3fn value."""


@dataclasses.dataclass(frozen=True)
class Built:
    """A provider prepared for one input: ``fn()`` returns C [m, n] bf16, or ``fn`` is None and
    ``note`` says why it is unavailable. ``note`` also says how an available one runs."""

    fn: Callable[[], torch.Tensor] | None
    note: str = ""

    @property
    def available(self) -> bool:
        return self.fn is not None


@dataclasses.dataclass(frozen=True)
class Provider:
    """A named way to compute (or, for the probe, to bound) the task's GEMM.

    build(data, device, timer=None) -> Built, with ``data`` from :func:`mxfp4.task.generate_input`.
    gpu_only: skipped without CUDA. gemm: computes a product (its error against the exact one is
    meaningful). exact: computes the task's function, so it is checked by ``testing.check_gemm``.
    """

    name: str
    description: str
    build: Callable[..., Built]
    gpu_only: bool = True
    gemm: bool = True
    exact: bool = False


def _needs_cuda(device: torch.device) -> Built | None:
    return None if device.type == "cuda" else Built(None, "needs a CUDA GPU")


def build_mxfp4(data, device: torch.device, timer=None) -> Built:
    a, _b, _bq, b_shuffle, b_scale_sh = data
    w = task.weight_from_task(b_shuffle, b_scale_sh, a.shape[1])
    if ops.select_backend(a) == "triton":
        config = ops.resolve_config(a.shape[0], w.shape[0], a.shape[1], a.device)
        note = f"Triton kernel {config.kernel!r}, {'two launches' if config.launches == 2 else 'one launch'} per call"
    else:
        note = "reference backend (PyTorch on CPU, not the Triton kernel)"
    return Built(lambda: ops.gemm_a4w4(a, w), note)


def build_cublas_bf16(data, device: torch.device, timer=None) -> Built:
    if (skip := _needs_cuda(device)) is not None:
        return skip
    a, b = data[0], data[1].to(torch.bfloat16).contiguous()
    return Built(lambda: torch.mm(a, b.t()), "torch.mm, A and the original weight in bf16")


def fp8_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [R, K] -> (e4m3 [R, K], float32 scale [R, 1]) with x ~= q * scale, amax per row to 448."""
    scale = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / FP8_MAX
    return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def scaled_mm(a8: torch.Tensor, w8: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    """bf16 a8 [M, K] @ w8[N, K]^T with rowwise scales [M, 1] and [1, N] (cuBLAS fp8)."""
    out = torch._scaled_mm(a8, w8.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
    return out[0] if isinstance(out, tuple) else out  # torch < 2.5 returned (out, amax)


def _build_scaled_mm(data, device: torch.device, a_in_call: bool) -> Built:
    """cuBLAS fp8 rowwise on the shape: W quantized to e4m3 here; A quantized in the call
    (``a_in_call``, as a layer would) or here too (the GEMM alone). Some cuBLAS fp8 paths want
    M % 16 == 0: where M = m fails, A is padded to a multiple of 16 rows (in the call, or here)."""
    if (skip := _needs_cuda(device)) is not None:
        return skip
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return Built(None, f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm")
    a, b = data[0], data[1]
    m = a.shape[0]
    w8, w_scale = fp8_rowwise(b)
    scale_b = w_scale.reshape(1, -1).contiguous()

    def quantized_a(pad: int) -> tuple[torch.Tensor, torch.Tensor]:
        return fp8_rowwise(torch.nn.functional.pad(a, (0, 0, 0, pad)) if pad else a)

    errors = []
    for pad in sorted({0, -m % 16}):
        if a_in_call:
            def fn(pad=pad) -> torch.Tensor:
                a8, scale_a = quantized_a(pad)
                return scaled_mm(a8, w8, scale_a, scale_b)[:m]
        else:
            a8, scale_a = quantized_a(pad)

            def fn(a8=a8, scale_a=scale_a) -> torch.Tensor:
                return scaled_mm(a8, w8, scale_a, scale_b)[:m]
        try:
            fn()
            torch.cuda.synchronize(device)
        except RuntimeError as exc:
            errors.append(str(exc).splitlines()[0])
            continue
        where = "in the call" if a_in_call else "before the call"
        note = ("torch._scaled_mm rowwise, A quantized to e4m3 per row in the call" if a_in_call
                else "torch._scaled_mm rowwise alone: A and W quantized to e4m3 before the call")
        return Built(fn, note + (f", A padded by {pad} rows {where}" if pad else ""))
    return Built(None, "torch._scaled_mm rowwise unsupported here: " + "; ".join(errors))


def build_cublas_fp8(data, device: torch.device, timer=None) -> Built:
    return _build_scaled_mm(data, device, a_in_call=True)


def build_cublas_fp8_gemm(data, device: torch.device, timer=None) -> Built:
    return _build_scaled_mm(data, device, a_in_call=False)


INT_MM_MIN_ROWS = 17
"""torch._int_mm on CUDA asks for more than 16 rows of A."""


def int8_rowwise(x: torch.Tensor) -> torch.Tensor:
    """x [R, K] -> int8 [R, K], x / (amax per row / 127) rounded (the scale is not kept)."""
    scale = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / 127.0
    return torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8)


def build_cublas_int8_gemm(data, device: torch.device, timer=None) -> Built:
    if (skip := _needs_cuda(device)) is not None:
        return skip
    if not hasattr(torch, "_int_mm"):
        return Built(None, f"torch {torch.__version__} has no _int_mm")
    a, b = data[0], data[1]
    m = a.shape[0]
    pad = max(0, INT_MM_MIN_ROWS - m)
    a8 = int8_rowwise(torch.nn.functional.pad(a, (0, 0, 0, pad)) if pad else a)
    w8t = int8_rowwise(b).t()  # [K, N], column-major
    try:
        torch._int_mm(a8, w8t)
        torch.cuda.synchronize(device)
    except RuntimeError as exc:
        return Built(None, "torch._int_mm unsupported here: " + str(exc).splitlines()[0])
    note = "torch._int_mm alone (int32 out, unscaled): A and W quantized to int8 per row before the call"
    return Built(lambda: torch._int_mm(a8, w8t)[:m], note + (f", A padded to {m + pad} rows" if pad else ""))


def build_torch_emulation(data, device: torch.device, timer=None) -> Built:
    if (skip := _needs_cuda(device)) is not None:
        return Built(None, "measured on the GPU only (on CPU it is the reference arithmetic of mxfp4)")
    a, _b, _bq, b_shuffle, b_scale_sh = data
    w = dequantize(task.weight_from_task(b_shuffle, b_scale_sh, a.shape[1])).to(torch.bfloat16)

    def fn() -> torch.Tensor:
        a_q = dequantize(quantize(a)).to(torch.bfloat16)  # exact in bf16: e2m1 value x power of two
        return torch.mm(a_q, w.t())

    return Built(fn, "mxfp4.quantize + dequantize of A by torch ops (many kernels), bf16 mm")


def stream_probe(words: torch.Tensor, scale_bytes: torch.Tensor, m: int, n: int, *, block: int = 2048,
                 num_warps: int = 4, out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch the streaming-floor probe: read ``words`` (int32) and ``scale_bytes`` (uint8) once,
    write C [m, n] bf16. One program per ``block`` words; see :func:`stream_probe_torch`."""
    import triton

    from ..kernels.stream_probe import stream_probe_kernel

    if out is None:
        out = torch.empty((m, n), dtype=torch.bfloat16, device=words.device)
    progs = max(1, triton.cdiv(words.numel(), block))
    s_per = triton.cdiv(scale_bytes.numel(), progs)
    c_per = triton.cdiv(m * n, progs)
    c_block = min(triton.next_power_of_2(c_per), 4096)
    stream_probe_kernel[(progs,)](
        words, words.numel(), scale_bytes, scale_bytes.numel(), out, m * n, s_per, c_per,
        W_BLOCK=block, S_BLOCK=triton.next_power_of_2(max(s_per, 1)), C_BLOCK=c_block,
        C_ITERS=triton.cdiv(c_per, c_block), num_warps=num_warps,
    )
    return out


def stream_probe_torch(words: torch.Tensor, scale_bytes: torch.Tensor, m: int, n: int, *,
                       block: int = 2048) -> torch.Tensor:
    """What :func:`stream_probe` writes, computed on the host (for tests)."""
    progs = max(1, -(-words.numel() // block))
    s_per = -(-scale_bytes.numel() // progs)
    c_per = -(-(m * n) // progs)
    w = np.zeros(progs * block, np.int32)
    w[:words.numel()] = words.cpu().numpy()
    s = np.zeros(progs * s_per, np.int32)
    s[:scale_bytes.numel()] = scale_bytes.cpu().numpy()
    x = np.bitwise_xor.reduce(w.reshape(progs, block), axis=1) ^ np.bitwise_xor.reduce(s.reshape(progs, s_per), axis=1)
    values = torch.from_numpy((x & 0xFF).astype(np.float32)).repeat_interleave(c_per)[:m * n]
    return values.to(torch.bfloat16).reshape(m, n)


PROBE_CONFIGS = ((512, 4), (1024, 4), (2048, 4), (4096, 8))
"""(int32 words per program, warps) tried for the probe; the fastest under the timing rule is kept."""


def build_stream_floor(data, device: torch.device, timer=None) -> Built:
    if (skip := _needs_cuda(device)) is not None:
        return skip
    if not ops.triton_available():
        return Built(None, "triton is not importable")
    a, _b, _bq, b_shuffle, b_scale_sh = data
    m, n = a.shape[0], b_shuffle.shape[0]
    words = b_shuffle.contiguous().view(torch.uint8).reshape(-1).view(torch.int32)
    scales = b_scale_sh.contiguous().view(torch.uint8).reshape(-1)
    best = (None, *PROBE_CONFIGS[2])
    if timer is not None:
        for block, warps in PROBE_CONFIGS:
            t = timer.time(lambda: stream_probe(words, scales, m, n, block=block, num_warps=warps),
                           min_runs=5, max_runs=30, budget_s=0.3)
            if best[0] is None or t.mean_us < best[0]:
                best = (t.mean_us, block, warps)
    _, block, warps = best
    progs = -(-words.numel() // block)
    note = f"reads W + scales once, writes C; {progs} programs x {block} words, {warps} warps"
    return Built(lambda: stream_probe(words, scales, m, n, block=block, num_warps=warps), note)


PROVIDERS = {p.name: p for p in (
    Provider("mxfp4", "this library: mxfp4.gemm_a4w4 on the task's shuffled weight", build_mxfp4,
             gpu_only=False, exact=True),
    Provider("cublas_bf16", "cuBLAS bf16 A @ W^T, weight kept in bf16", build_cublas_bf16),
    Provider("cublas_fp8", "cuBLAS fp8 rowwise, A quantized per row in the call", build_cublas_fp8),
    Provider("torch_emulation", "quantize + dequantize A with torch ops, bf16 mm", build_torch_emulation),
    Provider("stream_floor", "Triton probe: streams W + scales once, writes C", build_stream_floor, gemm=False),
    Provider("cublas_fp8_gemm", "cuBLAS fp8 rowwise GEMM alone, operands quantized before the call",
             build_cublas_fp8_gemm),
    Provider("cublas_int8_gemm", "cuBLAS int8 GEMM alone (torch._int_mm), operands quantized before the call",
             build_cublas_int8_gemm, gemm=False),
)}
"""Provider name -> :class:`Provider`, in table order."""


def resolve_providers(names: list[str] | tuple[str, ...] | None) -> tuple[Provider, ...]:
    """Providers by name (comma-separated items allowed); all of them when ``names`` is empty."""
    if not names:
        return tuple(PROVIDERS.values())
    wanted = [x for item in names for x in item.split(",") if x]
    unknown = [x for x in wanted if x not in PROVIDERS]
    if unknown:
        raise ValueError(f"unknown provider(s) {', '.join(unknown)}; choose from {', '.join(PROVIDERS)}")
    return tuple(PROVIDERS[x] for x in dict.fromkeys(wanted))
