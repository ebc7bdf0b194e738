"""Mixture of experts: every expert's MXFP4 weight stacked in one prepared tensor, and the grouped GEMM.

:class:`ExpertWeights` holds E experts' [N, K] weights as ONE prepared :class:`MXFP4Tensor` of logical
shape [E * Np, K], expert e in rows [e * Np, e * Np + N), Np = N rounded up to 256: the shuffled
scales' tile (aiter pads scale rows to 256), so expert e's rows are a prepared tensor of its own by
views alone (its codes are 16-row groups, its scales 32-row units, both contiguous; its scale rows
padded to 256 as a single weight's are). The padding rows are zero codes at scale 1 and are never
computed. :func:`grouped_gemm_a4w4` multiplies tokens sorted by expert with their experts' weights.
"""
from __future__ import annotations

import dataclasses

import torch

from .. import checks, ops, plan, reference
from ..device import sm_count
from ..tensor import Layout, MXFP4Tensor, prepare

ROW_TILE = 256
"""Each expert's rows start on a multiple of this: the shuffled scale layout's padded tile (256 rows)."""


def padded_rows(n: int) -> int:
    """Np: the rows an expert of N output rows takes in an :class:`ExpertWeights` (N rounded up to 256)."""
    return -(-n // ROW_TILE) * ROW_TILE


@dataclasses.dataclass(frozen=True)
class ExpertWeights:
    """E experts' MXFP4 weights [N, K], stacked along N in one prepared MXFP4Tensor [E * Np, K].

    ``weight`` is in aiter's shuffled layout (:func:`mxfp4.prepare`); expert e's output rows are
    rows [e * Np, e * Np + N) of it (``n_padded`` = Np = N rounded up to 256), the rest zero
    blocks. :meth:`expert` is expert e's weight as a prepared MXFP4Tensor of views; nothing else
    is kept. Build one with :meth:`stack`.
    """

    weight: MXFP4Tensor
    num_experts: int
    n: int

    def __post_init__(self) -> None:
        if not isinstance(self.weight, MXFP4Tensor):
            raise TypeError(f"ExpertWeights.weight must be an MXFP4Tensor, got {type(self.weight).__name__}")
        if self.weight.layout is not Layout.AITER_SHUFFLED:
            raise ValueError("ExpertWeights.weight must be prepared (aiter's shuffled layout): build it with "
                             "ExpertWeights.stack")
        for name in ("num_experts", "n"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"ExpertWeights.{name} must be a positive int, got {value!r}")
        want = (self.num_experts * padded_rows(self.n), self.weight.shape[1])
        if self.weight.shape != want:
            raise ValueError(f"ExpertWeights.weight must have logical shape {want} ({self.num_experts} experts of "
                             f"{padded_rows(self.n)} rows for N = {self.n}), got {self.weight.shape}")

    @property
    def k(self) -> int:
        return self.weight.shape[1]

    @property
    def n_padded(self) -> int:
        return padded_rows(self.n)

    @property
    def device(self) -> torch.device:
        return self.weight.device

    @classmethod
    def stack(cls, experts: list[MXFP4Tensor]) -> "ExpertWeights":
        """The experts' weights (each [N, K], plain or prepared, one shape and scale rule) stacked and prepared."""
        if not isinstance(experts, (list, tuple)) or not experts:
            raise ValueError("experts must be a non-empty list of MXFP4Tensor [N, K]")
        first = experts[0]
        for i, w in enumerate(experts):
            if not isinstance(w, MXFP4Tensor):
                raise TypeError(f"experts[{i}] must be an MXFP4Tensor, got {type(w).__name__}")
            if len(w.shape) != 2 or w.shape != first.shape or w.scale_rule is not first.scale_rule:
                raise ValueError(f"experts[{i}] is {w.shape} {w.scale_rule.name}; every expert must be 2-D "
                                 f"[N, K] like experts[0] ({first.shape} {first.scale_rule.name})")
            if w.device != first.device:
                raise ValueError(f"experts[{i}] is on {w.device}, experts[0] on {first.device}: every expert must be "
                                 "on one device (they are stacked into one tensor)")
        n, k = first.shape
        pad = padded_rows(n) - n
        data, scales = [], []
        for w in experts:
            w = w.to_layout(Layout.PLAIN)
            # zero codes at scale byte 127 (1.0): blocks of zeros, as prepare pads a weight
            data.append(torch.nn.functional.pad(w.data, (0, 0, 0, pad)))
            scales.append(torch.nn.functional.pad(w.scales, (0, 0, 0, pad), value=127))
        stacked = MXFP4Tensor(torch.cat(data), torch.cat(scales), (len(experts) * (n + pad), k), Layout.PLAIN,
                              first.scale_rule)
        return cls(prepare(stacked), len(experts), n)

    def expert(self, e: int) -> MXFP4Tensor:
        """Expert e's weight [N, K], prepared: views of rows [e * Np, (e + 1) * Np) of the stacked tensor."""
        if type(e) is not int:
            raise TypeError(f"e must be an int (the expert's index), got {type(e).__name__}")
        if not 0 <= e < self.num_experts:
            raise IndexError(f"expert {e} out of range for {self.num_experts} experts")
        r0, n16 = e * self.n_padded, -(-self.n // 16) * 16
        w = self.weight
        return MXFP4Tensor(w.data[r0:r0 + n16], w.scales[r0:r0 + self.n_padded], (self.n, self.k),
                           Layout.AITER_SHUFFLED, w.scale_rule)

    def plain(self, e: int) -> MXFP4Tensor:
        """Expert e's weight [N, K] in the plain layout (a copy: what checkpoints store)."""
        return self.expert(e).to_layout(Layout.PLAIN)

    def kept_bytes(self) -> int:
        return self.weight.data.numel() + self.weight.scales.numel()


def _check_offsets_tensor(offsets: torch.Tensor, num_experts: int, device: torch.device) -> None:
    """What :func:`check_offsets` checks without reading the values (no device-to-host copy)."""
    if not isinstance(offsets, torch.Tensor):
        raise TypeError(f"offsets must be a torch.Tensor, got {type(offsets).__name__}")
    if offsets.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"offsets must be int32 or int64, got {offsets.dtype}")
    if tuple(offsets.shape) != (num_experts,):
        raise ValueError(f"offsets must have shape ({num_experts},): one cumulative end per expert, got "
                         f"{tuple(offsets.shape)}")
    if offsets.device != device:
        raise ValueError(f"offsets ({offsets.device}) must be on a's device ({device})")


def check_offsets(offsets: torch.Tensor, num_experts: int, rows: int, device: torch.device) -> list[int]:
    """Validates ``offsets`` (see :func:`grouped_gemm_a4w4`) and returns them as host ints (on a GPU one
    device-to-host copy, which waits for the stream)."""
    _check_offsets_tensor(offsets, num_experts, device)
    ends = offsets.tolist()
    start = 0
    for e, end in enumerate(ends):
        if end < start:
            raise ValueError(f"offsets must be non-decreasing from 0 (cumulative ends): offsets[{e}] = {end} < "
                             f"{start}")
        start = end
    if start != rows:
        raise ValueError(f"offsets[-1] ({start}) must equal a.shape[0] ({rows}): every row belongs to an expert")
    return ends


def grouped_gemm_a4w4(a: torch.Tensor, w: ExpertWeights, offsets: torch.Tensor, *,
                      backend: str = "auto", params: plan.GroupedKernelParams | None = None,
                      bias: torch.Tensor | None = None) -> torch.Tensor:
    """C [T, N] bf16: row t of ``a`` [T, K] times the expert its group names, as :func:`mxfp4.gemm_a4w4`.

    ``a`` holds the tokens sorted by expert; ``offsets`` (int32 or int64 [E], on ``a``'s device) are
    cumulative ends, as ``torch._grouped_mm``'s ``offs``: expert e takes rows
    [offsets[e - 1], offsets[e]) (offsets[-1] read as 0), non-decreasing, the last equal to T. Empty
    experts and experts of one row are ordinary. Each row's result is :func:`mxfp4.gemm_a4w4` of that row
    (the CPU reference: the exact product rounded once to bf16; the kernels: within their contract),
    deterministic, nothing kept between calls. ``backend`` as for :func:`mxfp4.gemm_a4w4`.

    On a Hopper GPU two launches whatever the routing: A's rows quantized once, then a grouped kernel,
    which reads the offsets on the device: no host sync, so the call can be captured in a CUDA graph,
    and the offsets' values are not checked there (rows that offsets breaking the rule leave out or give
    to two experts are unspecified; nothing is accessed out of bounds). ``plan.grouped_heuristic``
    picks the kernel (or ``params``, a ``plan.GroupedStreamParams`` or ``plan.GroupedWgmmaParams``): the
    streaming GEMM's while a non-empty expert's mean rows are at most ``plan.GROUPED_STREAM_MAX_ROWS`` (decode), the
    large-M kernels grouped above it (prefill). Everywhere else the offsets are checked and read on the
    host. When N % 16 != 0 the kernels' result is a view of N columns of rows of N rounded up to 16 (as
    :func:`mxfp4.gemm_a4w4`'s).

    ``bias`` (bf16, fp16 or float32 [E, N], on ``a``'s device): row t gets its expert's row, added before the one
    rounding as :func:`mxfp4.gemm_a4w4`'s ``bias``. On a Hopper GPU the grouped kernel's float32 variant writes
    the totals, and each row's expert (found on the device from the offsets) gives its bias row, added in
    float32 and rounded once (no host read: a call with a bias is graph capturable too).
    """
    if not isinstance(w, ExpertWeights):
        raise TypeError(f"w must be an mxfp4.ExpertWeights (ExpertWeights.stack), got {type(w).__name__}")
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"a must be a torch.Tensor, got {type(a).__name__}")
    if a.dim() != 2:
        raise ValueError(f"a must be 2-D [T, K] (tokens sorted by expert), got shape {tuple(a.shape)}")
    checks.validate(a, w.weight, None)  # the stacked weight: every expert's K, device, layout and scale rule
    if a.requires_grad and torch.is_grad_enabled():
        raise ValueError("grouped_gemm_a4w4 is inference only (no autograd): call it under torch.no_grad()")
    if params is not None and not isinstance(params, (plan.GroupedStreamParams, plan.GroupedWgmmaParams)):
        raise TypeError(f"params must be a mxfp4.plan.GroupedStreamParams or GroupedWgmmaParams, got "
                        f"{type(params).__name__}")
    if params is not None and params.tile.out_f32:
        raise ValueError("params.tile.out_f32 variants write the float32 totals a call with a bias adds its rows "
                         "to, not grouped_gemm_a4w4's bf16 output: pass the bf16 variant (bias= takes the float32 "
                         "one itself)")
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or bias.dim() != 2 or bias.shape[0] != w.num_experts:
            raise ValueError(f"bias must be a tensor [{w.num_experts}, {w.n}] (one row per expert), got "
                             f"{getattr(bias, 'shape', type(bias).__name__)}")
        checks.validate_bias(bias[0], w.n, a.device)
    _check_offsets_tensor(offsets, w.num_experts, a.device)
    t = a.shape[0]
    chosen = ops.select_backend(a, w.weight, backend)
    if a.device.type == "meta":  # shapes only (a model built on the meta device)
        return a.new_empty((t, w.n), dtype=torch.bfloat16)
    if chosen == "cuda":
        if not t:
            return torch.empty((0, w.n), dtype=torch.bfloat16, device=a.device)
        n16, k64 = -(-w.n // 16) * 16, 2 * w.weight.data.shape[1]
        if params is None:
            params = _grouped_params(t, w.num_experts, n16, k64, a.device)
        else:
            params.check()
            if not params.fits(plan.Problem(t, n16, k64), w.num_experts):
                raise ValueError(f"params {params} do not fit {w.num_experts} experts of {n16}x{k64} (shared memory "
                                 f"at most {plan.SMEM_LIMIT})")
        if bias is None:
            return _grouped_on_kernels(a, w, offsets, params, n16)
        # the float32 totals, each row's expert's bias added (the expert found on the device), rounded once
        total = _grouped_on_kernels(a, w, offsets, plan.float32_output(params), n16)
        rows = torch.arange(t, device=a.device, dtype=offsets.dtype)
        expert = torch.searchsorted(offsets, rows, right=True).clamp_(max=w.num_experts - 1)
        return ops.add_bias(total, bias.index_select(0, expert), torch.bfloat16)
    ends = check_offsets(offsets, w.num_experts, t, a.device)
    out = torch.empty((t, w.n), dtype=torch.bfloat16, device=a.device)
    for e, (start, end) in enumerate(zip([0, *ends[:-1]], ends)):
        if end != start:
            b = None if bias is None else bias[e]
            out[start:end] = reference.gemm_a4w4(a[start:end], w.expert(e), scale_rule=w.weight.scale_rule, bias=b)
    return out


_chosen: dict[tuple[int, int, int, int, int], plan.GroupedKernelParams] = {}
"""plan.grouped_heuristic's answer per (T, E, N16, K64, device index), remembered for eager calls."""


def _grouped_params(t: int, e: int, n16: int, k64: int, device: torch.device) -> plan.GroupedKernelParams:
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (t, e, n16, k64, index)
    if key not in _chosen:
        _chosen[key] = plan.grouped_heuristic(t, e, n16, k64, sm_count(index))
    return _chosen[key]


def _grouped_on_kernels(a: torch.Tensor, w: ExpertWeights, offsets: torch.Tensor,
                        params: plan.GroupedKernelParams, n16: int) -> torch.Tensor:
    """A grouped kernel's call (two launches, the offsets read on the device): bf16, or the float32 totals
    for ``params``' float32 variant."""
    from ..cuda import ops as cuda_ops

    dtype = torch.float32 if params.tile.out_f32 else torch.bfloat16
    out = torch.empty((a.shape[0], n16), dtype=dtype, device=a.device)
    cuda_ops.grouped_gemm_a4w4(a, w.weight.data, w.weight.scales, offsets.contiguous(), out, params, w.num_experts,
                               w.n_padded)
    return out if n16 == w.n else out[:, :w.n]


# ---- the experts module ----------------------------------------------------------------------------
