"""The CUDA backend's entry points: argument checks that the kernels rely on, and the launches."""
from __future__ import annotations

import torch

from .. import formats, plan
from . import runtime

_QUANT_THREADS = 256
_P, _I, _I64 = runtime.Param.PTR, runtime.Param.I32, runtime.Param.I64
QUANTIZE = runtime.Signature("mxfp4_quantize", A=_P, lda=_I, codes=_P, scales=_P, M=_I, K=_I)
STREAM_FLOOR = runtime.Signature("mxfp4_stream_floor", w=_P, w16=_I64, s=_P, s16=_I64, c=_P, c4=_I64)
WGMMA_PEAK = runtime.Signature("mxfp4_wgmma_peak", iters=_I, out=_P)
_quant_configs: dict[int, runtime.LaunchConfig] = {}  # grid -> the quantize kernel's launch configuration


def gemm(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
         params: plan.KernelParams) -> torch.Tensor:
    """out [M, N16] (bf16, float32 for ``params.out_f32``) = quant(a [M, K]) x W^T by the kernel family of
    ``params``, the weight (data, scales) in aiter's shuffled layouts at K64 = 2 * data.shape[1]: the
    one way down from :mod:`mxfp4.ops` to a launch. The streaming GEMM reads ``a`` as it is (bf16, fp16
    or float32, K up to K64); the others read it as :func:`kernel_operand` makes it."""
    if isinstance(params, plan.StreamParams):
        return gemm_a4w4_stream(rows_for_kernel(a), data, scales, out, params)
    a = kernel_operand(a, 2 * data.shape[1])
    if isinstance(params, plan.WgmmaParams):
        return gemm_a4w4_wgmma(a, data, scales, out, params)
    if isinstance(params, plan.DecodeParams):
        return gemm_a4w4_decode(a, data, scales, out, params)
    return gemm_a4w4_small(a, data, scales, out, params)


def kernel_operand(a: torch.Tensor, k64: int) -> torch.Tensor:
    """2-D ``a`` [M, K] as the bf16-reading kernels take it: bf16 (fp16 / float32 as their quantized
    values, exact: :func:`mxfp4.formats.quantized_values_bf16`), K padded with zero blocks to the
    weight's K64, rows the kernels can load (else a copy)."""
    if a.dtype is not torch.bfloat16:
        a = formats.quantized_values_bf16(a)
    if k64 != a.shape[1]:  # zero blocks, as the weight's padding (one copy of A)
        return torch.nn.functional.pad(a, (0, k64 - a.shape[1]))
    return rows_for_kernel(a)


def gemm_a4w4_small(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
                    params: plan.SmallParams) -> torch.Tensor:
    """out [M, N] bf16 (float32 for ``params.out_f32``) = quant(a [M, K] bf16) x W^T, W in aiter's
    shuffled layouts (data, scales), by the short-K kernel (K = 32 * params.kb, M in tiles of
    params.tokens rows).

    One launch on the current stream; A is quantized inside it, nothing is allocated. The caller
    has validated shapes, dtypes and devices (``mxfp4.ops``); this checks what the kernel's loads
    and bulk copies need: 16-byte aligned rows, and the output dtype the variant writes.
    """
    m, k = a.shape
    n = data.shape[0]
    pa, lda = _rows(a)
    pw, ps, ldsc = _weight(data, scales)
    pc, ldc = _out(out, params, 1, 1, "")
    device = a.device
    kernel, config = runtime.small_launch(params, n, m, device)
    runtime.launch(kernel, config, device, pa, lda, pw, ps, ldsc, pc, ldc, m, n, k)
    return out


def gemm_a4w4_decode(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
                     params: plan.DecodeParams) -> torch.Tensor:
    """The decode path of :func:`gemm_a4w4` (M <= params.tokens; out float32 for ``params.out_f32``,
    else bf16): two launches on the current
    stream, A quantized into a workspace allocated for the call (``params.workspace_bytes``, freed
    with it), then the GEMM, which starts streaming the weight before A is ready."""
    m, k = a.shape
    n = data.shape[0]
    pa, lda = _rows(a)
    pw, ps, ldsc = _weight(data, scales)
    pc, ldc = _out(out, params, 2, 8, "an even row stride and an 8-byte aligned start")
    device = a.device
    quant, quant_cfg, gemm, gemm_cfg, ws_bytes = runtime.decode_launch(params, n, k, device)
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device)
    qa = ws.data_ptr()
    qs = qa + params.tokens * k
    runtime.launch(quant, quant_cfg, device, pa, lda, m, k, qa, qs, params.tokens)
    runtime.launch(gemm, gemm_cfg, device, qa, qs, pw, ps, ldsc, pc, ldc, m, n, k)
    return out


def gemm_a4w4_stream(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
                     params: plan.StreamParams) -> torch.Tensor:
    """The streaming GEMM's launches (M <= params.tokens; ``a`` bf16, fp16 or float32 [M, Ka],
    read as [M, K] with zero blocks past Ka; out float32 for ``params.out_f32``, else bf16): two
    launches on the current stream, A quantized into a workspace allocated for the call
    (``params.workspace_offsets``: A's operand, the CTAs' flags and partial tiles; freed with it), then
    the GEMM, which starts streaming the weight before A is ready."""
    m, ka = a.shape
    n, k = data.shape[0], 2 * data.shape[1]
    pa, lda = _rows(a)
    pw, ps, ldsc = _weight(data, scales)
    pc, ldc = _out(out, params, 2, 8, "an even row stride and an 8-byte aligned start")
    device = a.device
    quant, quant_cfg, kernel, kernel_cfg, grid, offsets = runtime.stream_launch(params, n, k, a.dtype, device)
    ws = torch.empty(offsets[3], dtype=torch.uint8, device=device)
    qa = ws.data_ptr()
    qs, flags, part = (qa + o for o in offsets[:3])
    runtime.launch(quant, quant_cfg, device, pa, lda, m, ka, k, qa, qs, params.tokens, flags, grid)
    runtime.launch(kernel, kernel_cfg, device, qa, qs, pw, ps, ldsc, pc, ldc, m, n, k, part, flags)
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
    pa, lda = _rows(a)
    pw, ps, ldsc = _weight(data, scales)
    pc, ldc = _out(out, params.tile, 2, 8, "an even row stride and an 8-byte aligned start")
    if not offsets.is_contiguous() or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError("offsets must be contiguous int32 or int64")
    device = a.device
    quant, quant_cfg, gemm, gemm_cfg, ws_bytes = runtime.grouped_launch(params, t, num_experts, n, k, device)
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device)
    qa = ws.data_ptr()
    qs = qa + t * k
    runtime.launch(quant, quant_cfg, device, pa, lda, t, k, qa, qs, t)
    runtime.launch(gemm, gemm_cfg, device, qa, qs, t, offsets.data_ptr(), 1 if offsets.dtype is torch.int64 else 0,
                   num_experts, pw, ps, ldsc, n_padded * data.shape[1], n_padded * ldsc, pc, ldc, n, k)
    return out


def gemm_a4w4_wgmma(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor,
                    params: plan.WgmmaParams) -> torch.Tensor:
    """The large-M path of :func:`gemm_a4w4`: two launches on the current stream (A quantized into
    the GEMM's int8 operand in a workspace allocated for the call, with, for ``params.int8_weight``,
    the weight as int8 beside it; then the wgmma GEMM, which reads the weight's codes and scale bytes
    as stored otherwise). The workspace is freed with the call."""
    m, k = a.shape
    n = data.shape[0]
    pa, lda = _rows(a)
    pw, ps, ldsc = _weight(data, scales)
    pc, ldc = _out(out, params, 8, 16, "a row stride that is a multiple of 8 and a 16-byte aligned start")
    device = a.device
    prep, prep_cfg, gemm, gemm_cfg, g = runtime.wgmma_launch(params, m, n, k, device)
    ws = torch.empty(g["ablob"] + g["wblob"], dtype=torch.uint8, device=device)
    ablob = ws.data_ptr()
    wblob = ablob + g["ablob"]
    runtime.launch(prep, prep_cfg, device, pa, lda, m, k, pw, ps, ldsc, n, ablob, wblob, g["ntile"], g["a_ctas"])
    weight = (wblob,) if params.int8_weight else (ps, ldsc, runtime.weight_map(pw, data.shape[0] // 16, k))
    runtime.launch(gemm, gemm_cfg, device, ablob, *weight, pc, ldc, m, n, k, g["ntile"], g["nwt"])
    return out


FLOOR_GRIDS = (132, 264, 528, 1056)
"""CTA counts the stream-floor launch is timed at (the bench keeps the fastest): one to eight per SM."""


def stream_floor(data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor, ctas: int) -> torch.Tensor:
    """One launch that reads the weight's bytes (codes and scales) once and writes ``out`` (C's size):
    the floor a GEMM launch on this backend cannot beat. ``out``'s contents are meaningless."""
    _weight(data, scales)
    k_ = runtime.kernel("stream_floor.cu", STREAM_FLOOR, None, out.device)
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
    k_ = runtime.kernel(params.source, WGMMA_PEAK, params.defines(), device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    out = torch.empty(sms * 256, dtype=torch.int32, device=device)
    config = runtime.config((sms, 1, 1), 256, 32768 + 1024, None)
    launch = lambda: runtime.launch(k_, config, device, PEAK_ITERS, out.data_ptr())  # noqa: E731
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


# The checks below read each tensor attribute once and hand the launch what it needs: one read costs
# 0.2-0.4 us of Python (CPU), and a call made about 30 of them.

def _row_layout(a: torch.Tensor) -> tuple[int, int, bool]:
    """(address, row stride, whether the kernels read ``a`` [M, K]'s rows: unit stride along K, a row
    stride that is a multiple of 8 and a 16-byte aligned start). A single row's stride is never read:
    its row stride is K."""
    (m, k), (s0, s1) = a.shape, a.stride()
    ptr = a.data_ptr()
    lda = s0 if m > 1 else k
    return ptr, lda, s1 == 1 and lda % 8 == 0 and ptr % 16 == 0


def _rows_ok(a: torch.Tensor) -> bool:
    return _row_layout(a)[2]


def rows_for_kernel(a: torch.Tensor) -> torch.Tensor:
    """``a`` [M, K] itself when the kernels can read its rows, else a copy in new storage (unit
    stride, aligned)."""
    return a if _rows_ok(a) else a.clone(memory_format=torch.contiguous_format)


def _rows(a: torch.Tensor) -> tuple[int, int]:
    """(address, row stride) of ``a`` [M, K] for a kernel, after checking the kernels can read its rows."""
    ptr, lda, ok = _row_layout(a)
    if not ok:
        raise ValueError("a must have unit stride along K, a row stride that is a multiple of 8 and a "
                         "16-byte aligned start")
    return ptr, lda


def _weight(data: torch.Tensor, scales: torch.Tensor) -> tuple[int, int, int]:
    """(codes' address, scales' address, scale row length) of a weight in aiter's shuffled layouts,
    after checking both are contiguous and 16-byte aligned."""
    pw, ps = data.data_ptr(), scales.data_ptr()
    if pw % 16 or ps % 16 or not (data.is_contiguous() and scales.is_contiguous()):
        raise ValueError("the weight's data and scales must be contiguous and 16-byte aligned")
    return pw, ps, scales.shape[1]


def _out(out: torch.Tensor, params, stride: int, align: int, rule: str) -> tuple[int, int]:
    """(address, row stride) of ``out`` after checking the dtype ``params`` writes (float32 for its
    ``out_f32`` variants, else bf16), unit stride along N, a row stride that is a multiple of
    ``stride`` and an ``align``-byte aligned start (``rule`` says so in the error)."""
    want = torch.float32 if params.out_f32 else torch.bfloat16
    if out.dtype is not want:
        raise ValueError(f"out must be {want} for {params} (it writes {want}), got {out.dtype}")
    (s0, s1), ptr = out.stride(), out.data_ptr()
    if s1 != 1 or s0 % stride or ptr % align:
        raise ValueError("out must have unit stride along N" + (f", {rule}" if rule else ""))
    return ptr, s0


def quantize(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed codes [M, K/2] and e8m0 scales [M, K/32] of bf16 a [M, K] (plain layout)."""
    m, k = a.shape
    pa, lda = _rows(a)
    codes = torch.empty((m, k // 2), dtype=torch.uint8, device=a.device)
    scales = torch.empty((m, k // 32), dtype=torch.uint8, device=a.device)
    if m:
        k_ = runtime.kernel("quantize.cu", QUANTIZE, None, a.device)
        grid = -(-m * (k // 8) // _QUANT_THREADS)
        config = _quant_configs.get(grid)
        if config is None:
            config = _quant_configs[grid] = runtime.config((grid, 1, 1), _QUANT_THREADS, 0, None)
        runtime.launch(k_, config, a.device, pa, lda, codes.data_ptr(), scales.data_ptr(), m, k)
    return codes, scales
