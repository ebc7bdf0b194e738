"""A minimal Llama-style decoder with a static KV cache, for the model benchmark.

The architecture of transformers' ``LlamaForCausalLM`` (RMSNorm, rotary embeddings, grouped-query
attention, SwiGLU MLP, untied output head), written out so that one decode step has static shapes:
the cache is a fixed [layers, batch, kv_heads, max_seq, head_dim] buffer written at ``pos`` and
attention runs over all ``max_seq`` slots with a mask. ``torch.compile(fullgraph=True)`` and CUDA
graph capture then see the same step every token. The projections are plain ``nn.Linear`` layers,
so :func:`mxfp4.quantize_` swaps them as it would a transformers model's. With ``experts`` set, each
layer's MLP is a mixture of experts instead (a bf16 router, softmax then top-k as Qwen2-MoE routes, and
:class:`Qwen2MoeExperts`, which ``quantize_`` swaps for :class:`mxfp4.moe.MXFP4Experts`).
"""
from __future__ import annotations

import dataclasses
import types

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True)
class LlamaShape:
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    max_seq: int
    rope_theta: float = 500000.0
    eps: float = 1e-5
    experts: int = 0  # > 0: every MLP is a mixture of this many experts
    top_k: int = 0
    expert_intermediate: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


TINY = LlamaShape(vocab=256, hidden=128, intermediate=256, layers=2, heads=4, kv_heads=2, max_seq=64)
"""The CPU test's size (hidden a multiple of 64)."""

REALISTIC = LlamaShape(vocab=32000, hidden=4096, intermediate=14336, layers=8, heads=32, kv_heads=8, max_seq=1024)
"""Llama-3-8B's layer widths, 8 layers."""

MOE = LlamaShape(vocab=32000, hidden=2048, intermediate=0, layers=8, heads=16, kv_heads=4, max_seq=1024, experts=64,
                 top_k=6, expert_intermediate=1408)
"""A mixture-of-experts decoder of DeepSeek-V2-Lite's expert widths (hidden 2048, 64 experts of 1408, top 6), 8
layers, no shared expert."""

TINY_MOE = LlamaShape(vocab=256, hidden=128, intermediate=0, layers=2, heads=4, kv_heads=2, max_seq=64, experts=8,
                      top_k=2, expert_intermediate=64)
"""The CPU test's mixture-of-experts size."""


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class Qwen2MoeExperts(nn.Module):
    """transformers v5's fused ``Qwen2MoeExperts`` written out (its class name, layout and grouped_mm forward;
    transformers is not a dependency of the bench): ``gate_up_proj`` [E, 2I, H] (gate rows first),
    ``down_proj`` [E, H, I], SiLU GLU; the (token, slot) pairs sorted by expert run as two
    ``torch._grouped_mm`` calls with the offsets counted on the device (no host read, so CUDA graphs
    capture it), the k weighted outputs summed in the product's dtype."""

    def __init__(self, experts: int, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.num_experts = experts
        self.gate_up_proj = nn.Parameter(torch.empty(experts, 2 * intermediate, hidden))
        self.down_proj = nn.Parameter(torch.empty(experts, hidden, intermediate))
        self.act_fn = nn.SiLU()
        self.config = types.SimpleNamespace(_experts_implementation="grouped_mm")

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        t, k = top_k_index.shape
        flat = top_k_index.reshape(-1)
        experts, order = torch.sort(flat, stable=True)
        counts = torch.zeros(self.num_experts, dtype=torch.int32, device=flat.device)
        offsets = counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32)).cumsum(0, dtype=torch.int32)
        x = hidden_states[order // k]
        gate, up = torch._grouped_mm(x, self.gate_up_proj.transpose(1, 2), offs=offsets).chunk(2, dim=-1)
        y = torch._grouped_mm(self.act_fn(gate) * up, self.down_proj.transpose(1, 2), offs=offsets)
        y = y * top_k_weights.reshape(-1)[order, None]
        pairs = torch.empty_like(y)
        pairs[order] = y
        return pairs.view(t, k, -1).sum(dim=1).to(hidden_states.dtype)


class MoE(nn.Module):
    """Qwen2-MoE's sparse block without its shared expert: router logits, softmax in float32, the top k
    weights (not renormalised) in the hidden dtype, the experts."""

    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.top_k = s.top_k
        self.gate = nn.Linear(s.hidden, s.experts, bias=False)
        self.experts = Qwen2MoeExperts(s.experts, s.hidden, s.expert_intermediate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, index = torch.topk(self.gate(flat).float().softmax(dim=-1), self.top_k, dim=-1)
        return self.experts(flat, index, weights.to(x.dtype)).view(x.shape)


class Layer(nn.Module):
    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.s = s
        d = s.head_dim
        self.input_layernorm = RMSNorm(s.hidden, s.eps)
        self.q_proj = nn.Linear(s.hidden, s.heads * d, bias=False)
        self.k_proj = nn.Linear(s.hidden, s.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(s.hidden, s.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(s.heads * d, s.hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.eps)
        if s.experts:
            self.mlp = MoE(s)
        else:
            self.gate_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
            self.up_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
            self.down_proj = nn.Linear(s.intermediate, s.hidden, bias=False)

    def forward(self, x, pos, cos, sin, mask, k_cache, v_cache):
        s, (b, t, _) = self.s, x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        att = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask, enable_gqa=True)
        x = x + self.o_proj(att.transpose(1, 2).reshape(b, t, s.heads * s.head_dim))
        h = self.post_attention_layernorm(x)
        if s.experts:
            return x + self.mlp(h)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Decoder(nn.Module):
    """Token ids [B, T] at positions ``pos`` [T] -> logits [B, T, vocab]; the cache holds batch ``batch``."""

    def __init__(self, s: LlamaShape, batch: int) -> None:
        super().__init__()
        self.s = s
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList(Layer(s) for _ in range(s.layers))
        self.norm = RMSNorm(s.hidden, s.eps)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        self.batch = batch
        self.init_buffers()

    def init_buffers(self, device: torch.device | None = None) -> None:
        """The rotary tables and the KV cache (non-persistent: no checkpoint holds them), on ``device``
        (default: the current default device); ``mxfp4.quantize_`` calls it for a model built on meta."""
        s = self.s
        inv_freq = 1.0 / s.rope_theta ** (torch.arange(0, s.head_dim, 2, dtype=torch.float32, device=device)
                                         / s.head_dim)
        angles = torch.outer(torch.arange(s.max_seq, dtype=torch.float32, device=device), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        cache = (s.layers, self.batch, s.kv_heads, s.max_seq, s.head_dim)
        self.register_buffer("k_cache", torch.zeros(cache, device=device), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache, device=device), persistent=False)

    def forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(ids)
        cos, sin = self.cos[pos], self.sin[pos]
        mask = torch.arange(self.s.max_seq, device=ids.device)[None, :] <= pos[:, None]  # [T, max_seq]
        for i, layer in enumerate(self.layers):
            x = layer(x, pos, cos, sin, mask, self.k_cache[i], self.v_cache[i])
        return self.lm_head(self.norm(x))

    def step(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """One decode step: ids [B, 1] at pos [1] -> logits [B, vocab] (static shapes)."""
        return self.forward(ids, pos)[:, -1]


def build(s: LlamaShape, batch: int, device: str | torch.device, seed: int = 0) -> Decoder:
    """The decoder in bf16 on ``device``, random weights (normal, std 0.02; norms 1)."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Decoder(s, batch)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.normal_(0.0, 0.02)
    return model.to(torch.bfloat16).eval().requires_grad_(False)
