"""The MXFP4 experts module of a mixture of experts (routing left to the model), and the transformers
expert layouts it replaces: fused 3-D parameters (DeepSeek-V3, Qwen2-MoE, Qwen3-MoE, GPT-OSS) and
per-expert MLP lists."""
from __future__ import annotations

import dataclasses
import enum
import operator

import torch
from torch import nn

from ..formats import BLOCK, ScaleRule
from ..ops import gemm_a4w4
from ..tensor import LAYER_DTYPES, Layout, MXFP4Tensor, applied_dtype, quantize
from .grouped import ExpertWeights, grouped_gemm_a4w4, padded_rows


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
    optional biases [E, 2I] / [E, H], added before each GEMM's one rounding.
    ``forward(hidden_states [T, H], top_k_index [T, k],
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
        if dtype not in LAYER_DTYPES:
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
        dtype = applied_dtype(fn, self.dtype, "MXFP4Experts")  # float64 and the rest refused, nothing changed
        self._weights = {}  # .to() replaces the buffers
        self.dtype = dtype
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

    def _mlp(self, x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Rows ``x`` sorted by expert (``offsets``: each expert's cumulative end) through their experts' MLPs, in
        the layer's dtype."""
        h = grouped_gemm_a4w4(x, self.weights("gate_up"), offsets, bias=self.gate_up_bias).to(self.dtype)
        return grouped_gemm_a4w4(self._activate(h), self.weights("down"), offsets, bias=self.down_bias).to(self.dtype)

    def _check_range(self, flat: torch.Tensor) -> None:
        """Every index in [0, E). Eager: two values read on the host (one copy), a ValueError naming them. Under
        torch.compile or CUDA graph capture nothing can be read: the device asserts instead (on a GPU, like any
        index out of range in a kernel, a fatal device-side assert), so no index is ever silently misrouted."""
        lo, hi = torch.aminmax(flat)
        if torch.compiler.is_compiling() or (flat.is_cuda and torch.cuda.is_current_stream_capturing()):
            torch._assert_async((lo >= 0) & (hi < self.num_experts),
                                f"top_k_index must hold experts in [0, {self.num_experts})")
            return
        lo, hi = torch.stack((lo, hi)).tolist()
        if lo < 0 or hi >= self.num_experts:
            raise ValueError(f"top_k_index must hold experts in [0, {self.num_experts}), got {lo}..{hi}")

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        for name, value in (("hidden_states", hidden_states), ("top_k_index", top_k_index),
                            ("top_k_weights", top_k_weights)):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if top_k_index.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"top_k_index must be int32 or int64 (expert indices), got {top_k_index.dtype}")
        t, k = top_k_index.shape if top_k_index.dim() == 2 else (-1, -1)
        if hidden_states.dim() != 2 or hidden_states.shape[1] != self.hidden_size or t != hidden_states.shape[0]:
            raise ValueError(f"hidden_states must be [T, {self.hidden_size}] and top_k_index [T, k], got "
                             f"{tuple(hidden_states.shape)} and {tuple(top_k_index.shape)}")
        if tuple(top_k_weights.shape) != (t, k):
            raise ValueError(f"top_k_weights must have top_k_index's shape {(t, k)}, got {tuple(top_k_weights.shape)}")
        flat = top_k_index.reshape(-1)
        if flat.numel() and not flat.is_meta:
            self._check_range(flat)
        experts, order = torch.sort(flat, stable=True)  # pairs by expert, tokens in order within one
        # each expert's cumulative end: the sorted pairs up to it (no host read)
        ends = torch.searchsorted(experts, torch.arange(self.num_experts, device=flat.device, dtype=flat.dtype),
                                  right=True)
        y = self._mlp(hidden_states[order // k], ends)
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
        gate_up_bias = m.gate_up_bias[e] if m.gate_up_bias is not None else None
        down_bias = m.down_bias[e] if m.down_bias is not None else None
        h = gemm_a4w4(x, m.weights("gate_up").expert(e), out_dtype=m.dtype, bias=gate_up_bias)
        return gemm_a4w4(m._activate(h), m.weights("down").expert(e), out_dtype=m.dtype, bias=down_bias)


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
