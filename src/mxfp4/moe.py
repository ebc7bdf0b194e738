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
import enum
import operator

import torch
from torch import nn

from . import ops, reference
from .formats import BLOCK, ScaleRule
from .ops import gemm_a4w4
from .tensor import Layout, MXFP4Tensor, prepare, quantize

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


def check_offsets(offsets: torch.Tensor, num_experts: int, rows: int, device: torch.device) -> list[int]:
    """Validates ``offsets`` (see :func:`grouped_gemm_a4w4`) and returns them as host ints (on a GPU one
    device-to-host copy, which waits for the stream)."""
    if not isinstance(offsets, torch.Tensor):
        raise TypeError(f"offsets must be a torch.Tensor, got {type(offsets).__name__}")
    if offsets.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"offsets must be int32 or int64, got {offsets.dtype}")
    if tuple(offsets.shape) != (num_experts,):
        raise ValueError(f"offsets must have shape ({num_experts},): one cumulative end per expert, got "
                         f"{tuple(offsets.shape)}")
    if offsets.device != device:
        raise ValueError(f"offsets ({offsets.device}) must be on a's device ({device})")
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
                      backend: str = "auto") -> torch.Tensor:
    """C [T, N] bf16: row t of ``a`` [T, K] times the expert its group names, as :func:`mxfp4.gemm_a4w4`.

    ``a`` holds the tokens sorted by expert; ``offsets`` (int32 or int64 [E], on ``a``'s device) are
    cumulative ends, as ``torch._grouped_mm``'s ``offs``: expert e takes rows
    [offsets[e - 1], offsets[e]) (offsets[-1] read as 0), non-decreasing, the last equal to T. Empty
    experts and experts of one row are ordinary. Each row's result is :func:`mxfp4.gemm_a4w4` of that row
    (the CPU reference: the exact product rounded once to bf16; the kernels: within their contract),
    deterministic, nothing kept between calls. ``backend`` as for :func:`mxfp4.gemm_a4w4`.

    The offsets are read on the host: on a GPU one device-to-host copy, which waits for the stream (so
    the call cannot be captured in a CUDA graph). The GPU path is one :func:`mxfp4.gemm_a4w4` launch per
    non-empty expert (two from 33 rows), on views of the stacked weight.
    """
    if not isinstance(w, ExpertWeights):
        raise TypeError(f"w must be an mxfp4.ExpertWeights (ExpertWeights.stack), got {type(w).__name__}")
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"a must be a torch.Tensor, got {type(a).__name__}")
    if a.dim() != 2:
        raise ValueError(f"a must be 2-D [T, K] (tokens sorted by expert), got shape {tuple(a.shape)}")
    ops.validate(a, w.expert(0), None)
    if a.requires_grad and torch.is_grad_enabled():
        raise ValueError("grouped_gemm_a4w4 is inference only (no autograd): call it under torch.no_grad()")
    ends = check_offsets(offsets, w.num_experts, a.shape[0], a.device)
    out = torch.empty((a.shape[0], w.n), dtype=torch.bfloat16, device=a.device)
    groups = [(e, start, end) for e, (start, end) in enumerate(zip([0, *ends[:-1]], ends)) if end > start]
    if ops.select_backend(a, w.expert(0), backend) == "reference":
        for e, start, end in groups:
            out[start:end] = reference.gemm_a4w4(a[start:end], w.expert(e), scale_rule=w.weight.scale_rule)
    else:
        _on_kernels(a, w, groups, out)
    return out


def _on_kernels(a: torch.Tensor, w: ExpertWeights, groups: list[tuple[int, int, int]], out: torch.Tensor) -> None:
    """The GPU path: one gemm_a4w4 per non-empty expert, written into its rows of ``out``. A single-launch
    grouped kernel (reading the offsets on the device) replaces this loop."""
    for e, start, end in groups:
        ops.gemm_a4w4(a[start:end], w.expert(e), out[start:end], backend="cuda")




# ---- the experts module ----------------------------------------------------------------------------

class Activation(enum.Enum):
    """How an expert turns its gate_up output [.., 2I] into the down projection's input [.., I]."""

    GLU = "act_fn(gate) * up; gate = gate_up rows [0, I), up = rows [I, 2I) (DeepSeek-V3, Qwen2-MoE, Qwen3-MoE)"
    GPT_OSS = ("g = gate.clamp(max=limit), u = up.clamp(-limit, limit), (u + 1) * (g * sigmoid(g * alpha)); "
               "gate = gate_up rows 2j (even), up = rows 2j + 1 (odd), interleaved (GPT-OSS)")


class Accumulation(enum.Enum):
    """How a token's k weighted expert outputs become its output (each as a transformers implementation does)."""

    EAGER = ("each output times its routing weight, cast to the hidden dtype and added into a zero output in "
             "ascending expert order, rounded after each add (the classes' own forward: index_add_ per expert)")
    SUM = ("each output times its routing weight, summed over the k slots by torch.sum in the product's dtype and "
           "cast once (transformers' grouped_mm and batched_mm experts implementations, its default)")


class MXFP4Experts(nn.Module):
    """A mixture of experts' MLPs with MXFP4 weights: routing is the model's.

    ``gate_up`` ([2I, H] per expert) and ``down`` ([H, I]) are :class:`ExpertWeights`, each one prepared
    MXFP4 tensor for all experts (buffers ``gate_up_data`` / ``_scales``, ``down_data`` / ``_scales``);
    optional biases [E, 2I] / [E, H]. ``forward(hidden_states [T, H], top_k_index [T, k],
    top_k_weights [T, k])`` is what transformers' MoE blocks call (v5: fused experts): the (token, slot)
    pairs sorted by expert, two :func:`grouped_gemm_a4w4` calls, the activation, the routing weights and
    the accumulation as the model's own code does them, in the layer's dtype (the model's). ``experts[e]``
    is expert e alone as a callable MLP ``x -> down(act(gate_up(x)))``, what per-expert blocks
    (``nn.ModuleList`` of MLPs, transformers v4) call.
    """

    def __init__(self, gate_up: ExpertWeights, down: ExpertWeights, activation: Activation, *,
                 accumulation: Accumulation = Accumulation.EAGER, act_fn: nn.Module | None = None,
                 alpha: float | None = None, limit: float | None = None, gate_up_bias: torch.Tensor | None = None,
                 down_bias: torch.Tensor | None = None, dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        if not isinstance(gate_up, ExpertWeights) or not isinstance(down, ExpertWeights):
            raise TypeError("gate_up and down must be mxfp4.ExpertWeights")
        e, hidden, inter = gate_up.num_experts, gate_up.k, down.k
        if down.num_experts != e or gate_up.n != 2 * inter or down.n != hidden:
            raise ValueError(f"gate_up ({e} experts of [{gate_up.n}, {hidden}]) and down ({down.num_experts} of "
                             f"[{down.n}, {inter}]) must be [2I, H] and [H, I] for the same experts")
        if not isinstance(activation, Activation) or not isinstance(accumulation, Accumulation):
            raise TypeError("activation must be an mxfp4.moe.Activation and accumulation an Accumulation")
        if (activation is Activation.GLU) != (act_fn is not None) or (
                (activation is Activation.GPT_OSS) != (alpha is not None and limit is not None)):
            raise ValueError("Activation.GLU takes act_fn (and no alpha, limit); Activation.GPT_OSS takes alpha and "
                             "limit (and no act_fn)")
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise TypeError(f"dtype must be torch.bfloat16, float16 or float32, got {dtype!r}")
        self.num_experts, self.hidden_size, self.intermediate_size = e, hidden, inter
        self.activation, self.accumulation, self.alpha, self.limit, self.dtype = (activation, accumulation, alpha,
                                                                                  limit, dtype)
        self.act_fn = act_fn
        self.scale_rule = gate_up.weight.scale_rule
        for name, w in (("gate_up", gate_up), ("down", down)):
            self.register_buffer(f"{name}_data", w.weight.data)
            self.register_buffer(f"{name}_scales", w.weight.scales)
        self._weights = {"gate_up": gate_up, "down": down}
        for name, bias, n in (("gate_up_bias", gate_up_bias, 2 * inter), ("down_bias", down_bias, hidden)):
            if bias is None:
                self.register_parameter(name, None)
                continue
            if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (e, n):
                raise ValueError(f"{name} must be a tensor of shape ({e}, {n}), got "
                                 f"{getattr(bias, 'shape', type(bias).__name__)}")
            self.register_parameter(name, nn.Parameter(bias.detach().to(dtype), requires_grad=False))

    def weights(self, name: str) -> ExpertWeights:
        """``gate_up`` or ``down`` as ExpertWeights over the buffers (rebuilt only when they change)."""
        w = self._weights.get(name)
        data, scales = self._buffers[f"{name}_data"], self._buffers[f"{name}_scales"]
        if w is None or w.weight.data is not data or w.weight.scales is not scales:
            n, k = ((2 * self.intermediate_size, self.hidden_size) if name == "gate_up"
                    else (self.hidden_size, self.intermediate_size))
            tensor = MXFP4Tensor(data, scales, (self.num_experts * padded_rows(n), k), Layout.AITER_SHUFFLED,
                                 self.scale_rule)
            w = self._weights[name] = ExpertWeights(tensor, self.num_experts, n)
        return w

    def _apply(self, fn, recurse=True):
        self._weights = {}  # .to() replaces the buffers
        self.dtype = fn(torch.empty(0, dtype=self.dtype)).dtype
        return super()._apply(fn, recurse)

    def kept_bytes(self) -> int:
        """Bytes kept for the experts' weights: the stacked MXFP4 codes and scale bytes."""
        return sum(self._buffers[b].numel() for b in ("gate_up_data", "gate_up_scales", "down_data", "down_scales"))

    def _activate(self, h: torch.Tensor) -> torch.Tensor:
        if self.activation is Activation.GLU:
            gate, up = h.chunk(2, dim=-1)
            return self.act_fn(gate) * up
        gate, up = h[..., ::2], h[..., 1::2]
        gate = gate.clamp(min=None, max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        return (up + 1) * (gate * torch.sigmoid(gate * self.alpha))

    def _mlp(self, x: torch.Tensor, offsets: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        """Rows ``x`` sorted by expert (``experts``: each row's) through their experts' MLPs, in the layer's dtype."""
        h = grouped_gemm_a4w4(x, self.weights("gate_up"), offsets).to(self.dtype)
        if self.gate_up_bias is not None:
            h = h + self.gate_up_bias[experts]
        y = grouped_gemm_a4w4(self._activate(h), self.weights("down"), offsets).to(self.dtype)
        return y + self.down_bias[experts] if self.down_bias is not None else y

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        t, k = top_k_index.shape if top_k_index.dim() == 2 else (-1, -1)
        if hidden_states.dim() != 2 or hidden_states.shape[1] != self.hidden_size or t != hidden_states.shape[0]:
            raise ValueError(f"hidden_states must be [T, {self.hidden_size}] and top_k_index [T, k], got "
                             f"{tuple(hidden_states.shape)} and {tuple(top_k_index.shape)}")
        if tuple(top_k_weights.shape) != (t, k):
            raise ValueError(f"top_k_weights must have top_k_index's shape {(t, k)}, got {tuple(top_k_weights.shape)}")
        flat = top_k_index.reshape(-1)
        counts = torch.bincount(flat, minlength=self.num_experts) if flat.numel() else flat.new_zeros(self.num_experts)
        if counts.numel() != self.num_experts:
            raise ValueError(f"top_k_index must hold experts in [0, {self.num_experts}), got {int(flat.max())}")
        experts, order = torch.sort(flat, stable=True)  # pairs by expert, tokens in order within one
        y = self._mlp(hidden_states[order // k], counts.cumsum(0), experts)
        y = y * top_k_weights.reshape(-1)[order, None]
        pairs = torch.empty_like(y)
        pairs[order] = y  # back to token-major (token, slot) order
        pairs = pairs.view(t, k, self.hidden_size)
        if self.accumulation is Accumulation.SUM:
            return pairs.sum(dim=1).to(hidden_states.dtype)
        pairs = pairs.to(hidden_states.dtype)
        by_expert = torch.argsort(top_k_index, dim=1, stable=True)
        rows = torch.arange(t, device=hidden_states.device)
        out = torch.zeros_like(hidden_states)
        for j in range(k):
            out = out + pairs[rows, by_expert[:, j]]
        return out

    def __len__(self) -> int:
        return self.num_experts

    def __getitem__(self, e) -> "Expert":
        return Expert(self, operator.index(e))

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, hidden_size={self.hidden_size}, "
                f"intermediate_size={self.intermediate_size}, activation={self.activation.name}, "
                f"accumulation={self.accumulation.name}, bias={self.down_bias is not None}, dtype={self.dtype}")


class Expert:
    """Expert e of an :class:`MXFP4Experts` as a callable MLP (views of the stacked weights; nothing kept)."""

    def __init__(self, experts: MXFP4Experts, e: int) -> None:
        if not 0 <= e < experts.num_experts:
            raise IndexError(f"expert {e} out of range for {experts.num_experts} experts")
        self.experts, self.e = experts, e

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        m, e = self.experts, self.e
        h = gemm_a4w4(x, m.weights("gate_up").expert(e), out_dtype=m.dtype)
        if m.gate_up_bias is not None:
            h = h + m.gate_up_bias[e]
        y = gemm_a4w4(m._activate(h), m.weights("down").expert(e), out_dtype=m.dtype)
        return y + m.down_bias[e] if m.down_bias is not None else y


# ---- transformers' experts modules -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ExpertsLayout:
    """Where a model's experts module keeps its weights and what its forward does, as :func:`experts_layout`
    reads it. ``fused``: 3-D parameters ``gate_up_proj`` / ``down_proj`` (transformers v5; ``transposed``:
    [E, H, 2I] / [E, I, H], else [E, 2I, H] / [E, H, I]); otherwise an ``nn.ModuleList`` of MLPs with
    ``gate_proj`` / ``up_proj`` / ``down_proj`` ``nn.Linear`` layers."""

    fused: bool
    transposed: bool
    activation: Activation
    bias: bool
    num_experts: int
    hidden_size: int
    intermediate_size: int
    dtype: torch.dtype


# The fused classes whose forward MXFP4Experts mirrors (transformers v5), by class name.
FUSED = {"DeepseekV3Experts": Activation.GLU, "Qwen2MoeExperts": Activation.GLU, "Qwen3MoeExperts": Activation.GLU,
         "GptOssExperts": Activation.GPT_OSS}


def experts_layout(module: nn.Module) -> ExpertsLayout | None:
    """The layout of a transformers experts module this library swaps (:data:`FUSED` classes, or a
    ``ModuleList`` of gate / up / down MLPs with an ``act_fn``), None for any other module."""
    activation = FUSED.get(type(module).__name__)
    if activation is not None:
        transposed = activation is Activation.GPT_OSS  # GPT-OSS multiplies x @ W: its weights are [K, N]
        e, a, b = module.gate_up_proj.shape
        hidden, inter = (a, b // 2) if transposed else (b, a // 2)
        return ExpertsLayout(True, transposed, activation, getattr(module, "down_proj_bias", None) is not None, e,
                             hidden, inter, module.gate_up_proj.dtype)
    if not isinstance(module, nn.ModuleList) or not len(module):
        return None
    first = module[0]
    projections = ("gate_proj", "up_proj", "down_proj")
    for m in module:
        if type(m) is not type(first) or not isinstance(getattr(m, "act_fn", None), nn.Module):
            return None
        for p in projections:
            lin, ref = getattr(m, p, None), getattr(first, p)
            if not isinstance(lin, nn.Linear) or lin.weight.shape != ref.weight.shape or (
                    (lin.bias is None) != (ref.bias is None)):
                return None
    hidden, inter = first.gate_proj.in_features, first.gate_proj.out_features
    if first.up_proj.weight.shape != (inter, hidden) or first.down_proj.weight.shape != (hidden, inter):
        return None
    return ExpertsLayout(False, False, Activation.GLU, first.down_proj.bias is not None, len(module), hidden, inter,
                         first.gate_proj.weight.dtype)


def accumulation_of(module: nn.Module) -> Accumulation:
    """The accumulation of the module's transformers experts implementation (``config._experts_implementation``:
    "eager" and per-expert ModuleLists add in expert order, the others sum)."""
    impl = getattr(getattr(module, "config", None), "_experts_implementation", "eager")
    return Accumulation.EAGER if impl in (None, "eager") else Accumulation.SUM


def _split(w: MXFP4Tensor) -> list[MXFP4Tensor]:
    """A plain [E, N, K] MXFP4Tensor as E plain [N, K] ones (views)."""
    return [MXFP4Tensor(w.data[e], w.scales[e], tuple(w.shape[1:]), Layout.PLAIN, w.scale_rule)
            for e in range(w.shape[0])]


def from_module(module: nn.Module, scale_rule: ScaleRule = ScaleRule.AITER) -> MXFP4Experts:
    """An :class:`MXFP4Experts` quantized from a transformers experts module's own weights (its layout by
    :func:`experts_layout`); the layer keeps the module's dtype, activation and accumulation."""
    layout = experts_layout(module)
    if layout is None:
        raise TypeError(f"{type(module).__name__} is not an experts module mxfp4 swaps (classes {sorted(FUSED)}, or "
                        "a ModuleList of gate_proj / up_proj / down_proj MLPs)")
    for what, k in (("hidden_size", layout.hidden_size), ("intermediate_size", layout.intermediate_size)):
        if k % BLOCK:
            raise ValueError(f"{type(module).__name__}: {what} ({k}) must be a multiple of {BLOCK} (one e8m0 scale "
                             "per 32 inputs of each projection)")
    with torch.no_grad():
        if layout.fused:
            gate_up, down = module.gate_up_proj.detach(), module.down_proj.detach()
            if layout.transposed:
                gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)
            gate_up_bias = module.gate_up_proj_bias if layout.bias else None
            down_bias = module.down_proj_bias if layout.bias else None
        else:
            gate_up = torch.stack([torch.cat([m.gate_proj.weight, m.up_proj.weight]) for m in module])
            down = torch.stack([m.down_proj.weight for m in module])
            gate_up_bias = (torch.stack([torch.cat([m.gate_proj.bias, m.up_proj.bias]) for m in module])
                            if layout.bias else None)
            down_bias = torch.stack([m.down_proj.bias for m in module]) if layout.bias else None
        gate_up = ExpertWeights.stack(_split(quantize(gate_up.contiguous(), scale_rule)))
        down = ExpertWeights.stack(_split(quantize(down.contiguous(), scale_rule)))
    return MXFP4Experts(gate_up, down, layout.activation, **activation_args(module, layout),
                        gate_up_bias=gate_up_bias, down_bias=down_bias, dtype=layout.dtype)


def activation_args(module: nn.Module, layout: ExpertsLayout) -> dict:
    """The keyword arguments of MXFP4Experts that the model's module fixes: the activation's parameters
    (``act_fn``, or GPT-OSS's ``alpha`` and ``limit``) and the accumulation."""
    args = {"accumulation": accumulation_of(module) if layout.fused else Accumulation.EAGER}
    if layout.activation is Activation.GPT_OSS:
        return {**args, "alpha": float(module.alpha), "limit": float(module.limit)}
    return {**args, "act_fn": module.act_fn if layout.fused else module[0].act_fn}


def join_gate_up(gate: torch.Tensor, up: torch.Tensor, activation: Activation) -> torch.Tensor:
    """One expert's gate [I, ...] and up [I, ...] rows (codes, scales or biases) in its gate_up order:
    concatenated for GLU, interleaved (gate row j at 2j, up row j at 2j + 1) for GPT-OSS."""
    if activation is Activation.GLU:
        return torch.cat([gate, up])
    return torch.stack([gate, up], dim=1).reshape(2 * gate.shape[0], *gate.shape[1:])


def split_gate_up(gate_up: torch.Tensor, activation: Activation) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse of :func:`join_gate_up`: (gate, up) rows of one expert's gate_up rows."""
    if activation is Activation.GLU:
        gate, up = gate_up.chunk(2)
    else:
        gate, up = gate_up[0::2], gate_up[1::2]
    return gate.contiguous(), up.contiguous()


__all__ = ["ExpertWeights", "grouped_gemm_a4w4", "padded_rows", "Activation", "Accumulation", "MXFP4Experts", "Expert",
           "ExpertsLayout", "experts_layout", "from_module", "join_gate_up", "split_gate_up"]
