"""The CUDA backend's entry points: argument checks that the kernels rely on, and the launches."""
from __future__ import annotations

import torch

from .. import plan
from . import runtime
from .runtime import i32

_QUANT_THREADS = 256
_quant_configs: dict[int, runtime.LaunchConfig] = {}  # grid -> the quantize kernel's launch configuration


def gemm_a4w4(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
              params: plan.GemmParams) -> torch.Tensor:
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, K] bf16) x W^T, W in aiter's
    shuffled layouts (data, scales).

    One launch on the current stream; A is quantized inside it, nothing is allocated. The caller
    has validated shapes, dtypes and devices (``mxfp4.ops``); this checks what the kernel's loads
    and bulk copies need: 16-byte aligned rows, and the output dtype the variant writes.
    """
    m, k = a.shape
    n = data.shape[0]
    lda = _check_rows(a)
    _check_weight(data, scales)
    _check_out_dtype(out, params)
    if out.stride(1) != 1:
        raise ValueError("out must have unit stride along N")
    kernel, config = runtime.gemm_launch(params, (-(-n // params.bn), -(-m // params.bm)), a.device)
    runtime.launch(kernel, config, a.device, a.data_ptr(), i32(lda), data.data_ptr(), scales.data_ptr(),
                   i32(scales.shape[1]), out.data_ptr(), i32(out.stride(0)), i32(m), i32(n), i32(k))
    return out


def gemm_a4w4_decode(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
                     params: plan.DecodeParams) -> torch.Tensor:
    """The decode path of :func:`gemm_a4w4` (M <= params.tokens; out float32 for ``params.out_f32``,
    else bf16): two launches on the current
    stream, A quantized into a workspace allocated for the call (``params.workspace_bytes``, freed
    with it), then the GEMM, which starts streaming the weight before A is ready."""
    m, k = a.shape
    n = data.shape[0]
    lda = _check_rows(a)
    _check_weight(data, scales)
    if out.stride(1) != 1 or out.stride(0) % 2 or out.data_ptr() % 8:
        raise ValueError("out must have unit stride along N, an even row stride and an 8-byte aligned start")
    _check_out_dtype(out, params)
    quant, quant_cfg, gemm, gemm_cfg = runtime.decode_launch(params, n, k, a.device)
    ws = torch.empty(params.workspace_bytes(k), dtype=torch.uint8, device=a.device)
    qa = ws.data_ptr()
    qs = qa + params.tokens * k
    runtime.launch(quant, quant_cfg, a.device, a.data_ptr(), i32(lda), i32(m), i32(k), qa, qs, i32(params.tokens))
    runtime.launch(gemm, gemm_cfg, a.device, qa, qs, data.data_ptr(), scales.data_ptr(), i32(scales.shape[1]),
                   out.data_ptr(), i32(out.stride(0)), i32(m), i32(n), i32(k))
    return out


def grouped_gemm_a4w4(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
                      out: torch.Tensor, params: plan.GroupedParams, num_experts: int, n_padded: int) -> torch.Tensor:
    """out [T, N] bf16: row t of quant(a [T, K] bf16) times its expert's weight, the experts stacked in
    aiter's shuffled layouts (data, scales: expert e's N rows at row e * n_padded), tokens sorted by
    expert, ``offsets`` (int32 / int64 [E], on the device) their cumulative ends, read by the kernel.

    Two launches on the current stream and no host read of the offsets (graph capturable): A's rows
    quantized into a workspace allocated for the call (``params.workspace_bytes``, freed with it),
    then the grouped GEMM. Offsets that break the rule (``moe.grouped_gemm_a4w4``) are not detected:
    the rows they leave out, or give to two experts, are unspecified; nothing is read or written out
    of bounds."""
    t, k = a.shape
    n = out.shape[1]
    lda = _check_rows(a)
    _check_weight(data, scales)
    _check_out_dtype(out, params.tile)
    if out.stride(1) != 1 or out.stride(0) % 2 or out.data_ptr() % 8:
        raise ValueError("out must have unit stride along N, an even row stride and an 8-byte aligned start")
    if not offsets.is_contiguous() or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError("offsets must be contiguous int32 or int64")
    quant, quant_cfg, gemm, gemm_cfg = runtime.grouped_launch(params, t, num_experts, n, k, a.device)
    ws = torch.empty(params.workspace_bytes(t, k), dtype=torch.uint8, device=a.device)
    qa = ws.data_ptr()
    qs = qa + t * k
    runtime.launch(quant, quant_cfg, a.device, a.data_ptr(), i32(lda), i32(t), i32(k), qa, qs, i32(t))
    runtime.launch(gemm, gemm_cfg, a.device, qa, qs, i32(t), offsets.data_ptr(),
                   i32(1 if offsets.dtype is torch.int64 else 0), i32(num_experts), data.data_ptr(), scales.data_ptr(),
                   i32(scales.shape[1]), n_padded * data.shape[1], n_padded * scales.shape[1], out.data_ptr(),
                   i32(out.stride(0)), i32(n), i32(k))
    return out


def gemm_a4w4_wgmma(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
                    params: plan.WgmmaParams) -> torch.Tensor:
    """The large-M path of :func:`gemm_a4w4`: two launches on the current stream (A quantized into
    the GEMM's int8 operand in a workspace allocated for the call, with, for ``params.int8_weight``,
    the weight as int8 beside it; then the wgmma GEMM, which reads the weight's codes and scale bytes
    as stored otherwise). The workspace is freed with the call."""
    m, k = a.shape
    n = data.shape[0]
    lda = _check_rows(a)
    _check_weight(data, scales)
    _check_out_dtype(out, params)
    if out.stride(1) != 1 or out.stride(0) % 8 or out.data_ptr() % 16:
        raise ValueError("out must have unit stride along N, a row stride that is a multiple of 8 and a "
                         "16-byte aligned start")
    prep, prep_cfg, gemm, gemm_cfg, g = runtime.wgmma_launch(params, m, n, k, a.device)
    ws = torch.empty(g["ablob"] + g["wblob"], dtype=torch.uint8, device=a.device)
    ablob = ws.data_ptr()
    wblob = ablob + g["ablob"]
    ldsc = i32(scales.shape[1])
    runtime.launch(prep, prep_cfg, a.device, a.data_ptr(), i32(lda), i32(m), i32(k), data.data_ptr(),
                   scales.data_ptr(), ldsc, i32(n), ablob, wblob, i32(g["ntile"]), i32(g["a_ctas"]))
    weight = (wblob,) if params.int8_weight else (scales.data_ptr(), ldsc, runtime.weight_map(data, k))
    runtime.launch(gemm, gemm_cfg, a.device, ablob, *weight, out.data_ptr(), i32(out.stride(0)), i32(m),
                   i32(n), i32(k), i32(g["ntile"]), i32(g["nwt"]))
    return out


FLOOR_GRIDS = (132, 264, 528, 1056)
"""CTA counts the stream-floor launch is timed at (the bench keeps the fastest): one to eight per SM."""


def stream_floor(data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor, ctas: int) -> torch.Tensor:
    """One launch that reads the weight's bytes (codes and scales) once and writes ``out`` (C's size):
    the floor a GEMM launch on this backend cannot beat. ``out``'s contents are meaningless."""
    _check_weight(data, scales)
    k_ = runtime.kernel("stream_floor.cu", "mxfp4_stream_floor", None, out.device)
    config = runtime.config((ctas, 1, 1), 256, 0, None)
    runtime.launch(k_, config, out.device, data.data_ptr(), data.numel() // 16, scales.data_ptr(),
                   scales.numel() // 16, out.data_ptr(), out.numel() * out.element_size() // 4)
    return out


PEAK_ITERS = 2000


def int8_wgmma_tops(device: torch.device) -> float:
    """The int8 wgmma rate of this GPU (TOPS): ``mxfp4_wgmma_peak`` on one CTA an SM, two warpgroups
    of m64n128k32 on shared-memory operands, timed with events (no memory traffic)."""
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    params = plan.WgmmaParams(128, 3, True)  # a shipped variant: its cubin holds the peak kernel too
    k_ = runtime.kernel(params.source, "mxfp4_wgmma_peak", params.defines(), device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    out = torch.empty(sms * 256, dtype=torch.int32, device=device)
    config = runtime.config((sms, 1, 1), 256, 32768 + 1024, None)
    launch = lambda: runtime.launch(k_, config, device, i32(PEAK_ITERS), out.data_ptr())  # noqa: E731
    launch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        launch()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3)
    return sms * 2 * PEAK_ITERS * 4 * 2 * 64 * 128 * 32 / best / 1e6


def _lda(a: torch.Tensor) -> int:
    """Row stride the kernels use: a single row's stride is never read."""
    return a.stride(0) if a.shape[0] > 1 else a.shape[1]


def _rows_ok(a: torch.Tensor) -> bool:
    return a.stride(1) == 1 and _lda(a) % 8 == 0 and a.data_ptr() % 16 == 0


def rows_for_kernel(a: torch.Tensor) -> torch.Tensor:
    """``a`` [M, K] itself when the kernels can read its rows, else a copy in new storage (unit
    stride, aligned)."""
    return a if _rows_ok(a) else a.clone(memory_format=torch.contiguous_format)


def _check_weight(data: torch.Tensor, scales: torch.Tensor) -> None:
    if not (data.is_contiguous() and scales.is_contiguous() and data.data_ptr() % 16 == 0
            and scales.data_ptr() % 16 == 0):
        raise ValueError("the weight's data and scales must be contiguous and 16-byte aligned")


def _check_out_dtype(out: torch.Tensor, params: plan.GemmParams | plan.DecodeParams | plan.WgmmaParams) -> None:
    want = torch.float32 if params.out_f32 else torch.bfloat16
    if out.dtype is not want:
        raise ValueError(f"out must be {want} for {params} (it writes {want}), got {out.dtype}")


def _check_rows(a: torch.Tensor) -> int:
    """The row stride the kernels use, after checking the rows are readable by them."""
    if not _rows_ok(a):
        raise ValueError("a must have unit stride along K, a row stride that is a multiple of 8 and a "
                         "16-byte aligned start")
    return _lda(a)


def quantize(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed codes [M, K/2] and e8m0 scales [M, K/32] of bf16 a [M, K] (plain layout)."""
    m, k = a.shape
    lda = _check_rows(a)
    codes = torch.empty((m, k // 2), dtype=torch.uint8, device=a.device)
    scales = torch.empty((m, k // 32), dtype=torch.uint8, device=a.device)
    if m:
        k_ = runtime.kernel("quantize.cu", "mxfp4_quantize", None, a.device)
        grid = -(-m * (k // 8) // _QUANT_THREADS)
        config = _quant_configs.get(grid)
        if config is None:
            config = _quant_configs[grid] = runtime.config((grid, 1, 1), _QUANT_THREADS, 0, None)
        runtime.launch(k_, config, a.device, a.data_ptr(), i32(lda), codes.data_ptr(), scales.data_ptr(),
                       i32(m), i32(k))
    return codes, scales
