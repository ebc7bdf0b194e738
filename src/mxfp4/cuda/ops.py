"""The CUDA backend's entry points: the GEMMs, each by its family's launch (:mod:`mxfp4.cuda.launch`,
built once per parameter set, shape and device), A's quantization, and the benchmark's two kernels."""
from __future__ import annotations

import torch

from .. import plan
from . import runtime
from .launch import A_KINDS, Launch, a_defines, rows_for_kernel, weight
from .launch.band import BandLaunch
from .launch.decode import DecodeLaunch
from .launch.small import SmallLaunch
from .launch.stream import GroupedStreamLaunch, StreamLaunch
from .launch.wgmma import GroupedWgmmaLaunch, WgmmaLaunch

PTR, I32, I64 = runtime.Param.PTR, runtime.Param.I32, runtime.Param.I64

FAMILIES: dict[type, type[Launch]] = {plan.SmallParams: SmallLaunch, plan.DecodeParams: DecodeLaunch,
                                      plan.StreamParams: StreamLaunch, plan.BandParams: BandLaunch,
                                      plan.WgmmaParams: WgmmaLaunch}
"""The launch of each dense GEMM's parameter set (``plan.KERNEL_PARAMS``)."""

GROUPED_FAMILIES: dict[type, type] = {plan.GroupedStreamParams: GroupedStreamLaunch,
                                      plan.GroupedWgmmaParams: GroupedWgmmaLaunch}
"""The launch of each grouped GEMM's parameter set (``plan.grouped_heuristic``)."""

_launches: dict[tuple, Launch] = {}
"""The launches built, by their ``key``: the parameter set, the part of the shape a launch depends on,
the device index."""


def launch_for(params: plan.KernelParams, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> Launch:
    """The launch of ``params`` for A [m, K] of ``dtype`` and a weight of n rows and k columns on
    ``device``, built once a ``key``: the one way down from :mod:`mxfp4.ops` to a dense GEMM's kernels. Called
    with (a [m, K], data [n, k / 2], scales, out [m, n]) in aiter's shuffled layouts, it makes A what its kernels
    read (its family's ``operand``) and writes out (bf16, float32 for ``params.out_f32``); the caller has
    validated shapes, dtypes and devices, the launch checks what its kernels' loads need."""
    family = FAMILIES[type(params)]
    key = family.key(params, m, n, k, dtype, device.index)
    launch = _launches.get(key)
    if launch is None:
        launch = _launches[key] = family(params, m, n, k, dtype, device)
    return launch


def builds(params: plan.KernelParams | plan.GroupedKernelParams) -> list[tuple[str, dict[str, int] | None]]:
    """The (source, defines) builds a call of ``params`` may load, for A of any dtype: its module once for
    each dtype where a kernel of it quantizes A, else once and ``quantize.cu``'s quantizer for each dtype."""
    family = FAMILIES.get(type(params)) or GROUPED_FAMILIES[type(params)]
    if family.QUANTIZES_A:
        return [(params.source, a_defines(params.defines(), dtype)) for dtype in A_KINDS]
    return [(params.source, params.defines())] + [("quantize.cu", a_defines(None, dtype)) for dtype in A_KINDS]


def grouped_gemm_a4w4(a: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
                      out: torch.Tensor, params: plan.GroupedKernelParams, num_experts: int,
                      n_padded: int) -> torch.Tensor:
    """out [T, N] bf16 (float32 for ``params``' float32 variant): row t of quant(a [T, K]) times its expert's
    weight by the grouped GEMM of ``params`` (``launch.stream.GroupedStreamLaunch``,
    ``launch.wgmma.GroupedWgmmaLaunch``), the experts stacked in aiter's shuffled layouts (data, scales:
    expert e's N rows at row e * n_padded), tokens sorted by expert, ``offsets`` (int32 / int64 [E], on
    the device) their cumulative ends. Offsets that break the rule (``moe.grouped_gemm_a4w4``) are not
    detected: the rows they leave out, or give to two experts, are unspecified; nothing is read or
    written out of bounds."""
    t, n, k64, device = a.shape[0], out.shape[1], 2 * data.shape[1], a.device
    family = GROUPED_FAMILIES[type(params)]
    key = family.key(params, t, num_experts, n, k64, a.dtype, device.index)
    launch = _launches.get(key)
    if launch is None:
        launch = _launches[key] = family(params, t, num_experts, n, k64, a.dtype, device)
    return launch(a, data, scales, offsets, out, num_experts, n_padded)


STREAM_FLOOR = runtime.Signature("mxfp4_stream_floor", w=PTR, w16=I64, s=PTR, s16=I64, c=PTR, c4=I64)

FLOOR_GRIDS = (132, 264, 528, 1056)
"""CTA counts the stream-floor launch is timed at (the bench keeps the fastest): one to eight per SM."""


def stream_floor(data: torch.Tensor, scales: torch.Tensor, out: torch.Tensor, ctas: int) -> torch.Tensor:
    """One launch that reads the weight's bytes (codes and scales) once and writes ``out`` (C's size):
    the floor a GEMM launch on this backend cannot beat. ``out``'s contents are meaningless."""
    weight(data, scales)
    k_ = runtime.kernel("stream_floor.cu", STREAM_FLOOR, None, out.device)
    config = runtime.config((ctas, 1, 1), 256, 0, None)
    runtime.launch(k_, config, out.device, data.data_ptr(), data.numel() // 16, scales.data_ptr(),
                   scales.numel() // 16, out.data_ptr(), out.numel() * out.element_size() // 4)
    return out


PEAK = runtime.Signature("mxfp4_wgmma_peak", iters=I32, out=PTR)
"""The int8 wgmma rate's kernel (``wgmma_peak.cu``, a benchmark kernel: no GEMM's cubin holds it)."""

PEAK_ITERS = 2000
PEAK_SMEM = 32768 + 1024
"""The peak kernel's dynamic shared memory: its operands (32 KiB) and 1 KiB for the alignment (SMEM_BYTES in
wgmma_peak.cu, exported as mxfp4_wgmma_peak_smem_bytes; the kernel traps on less)."""


def int8_wgmma_tops(device: torch.device) -> float:
    """The int8 wgmma rate of this GPU (TOPS): ``mxfp4_wgmma_peak`` on one CTA an SM, two warpgroups
    of m64n128k32 on shared-memory operands, timed with events (no memory traffic)."""
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    k_ = runtime.kernel("wgmma_peak.cu", PEAK, None, device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    out = torch.empty(sms * 256, dtype=torch.int32, device=device)
    config = runtime.config((sms, 1, 1), 256, PEAK_SMEM, None)
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


QUANTIZE = runtime.Signature("mxfp4_quantize", A=PTR, lda=I32, codes=PTR, scales=PTR, M=I32, K=I32)
_QUANT_THREADS = 256
_quant_configs: dict[int, runtime.LaunchConfig] = {}  # grid -> the quantize kernel's launch configuration


def quantize(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed codes [M, K/2] and e8m0 scales [M, K/32] of bf16 a [M, K] (plain layout; a's rows copied
    first where the kernel cannot read them)."""
    a, pa, lda = rows_for_kernel(a)  # kept until the launch is queued
    m, k = a.shape
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
