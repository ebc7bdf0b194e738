"""The bench's data sets: the task's randn inputs, model-like inputs and heavy-tailed inputs.

"randn" is the task's ``generate_input``. "model" imitates what real LLM layers hold: activations
with per-token scales (log-normal, sigma 1) and a few outlier channels (one in 512, at least 2,
20 to 200 times the rest), weights with per-row scales (log-normal, sigma 0.5) and a few outlier
input columns (one in 512, at least 2, 8 to 50 times the rest). There the block exponents of a
256-element segment spread over more than 3 binary orders wherever an outlier falls, which is what
a kernel that folds block scales must survive. "heavy" imitates the q/k/v-projection inputs of a
real model (after RMSNorm): Student-t activations with 2 degrees of freedom (one hump and a smooth
tail, not a few fixed outlier channels) times per-channel scales (log-normal, sigma 1.25) and
per-token scales (log-normal, sigma 1), and weights as real ones are, randn with per-row scales
(log-normal, sigma 0.5). On it about 40% of the (token, 256-element segment) pairs spread their
block exponents over more than 3 binary orders (a real Llama-architecture model: 42% on average over
its q/k/v inputs, up to 78%; the model-like set about 29%).
"""
from __future__ import annotations

import torch

from .. import layouts, task
from ..tensor import Layout, MXFP4Tensor, quantize

DATA_SETS = ("randn", "model", "heavy")


def _outliers(g: torch.Generator, k: int, low: float, high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Columns (one in 512 of k, at least 2) and their gains, log-uniform in [low, high]."""
    count = max(2, k // 512)
    cols = torch.randperm(k, generator=g)[:count]
    bounds = torch.tensor([low, high]).log().tolist()  # float32 logs: the data the benchmarks were measured on
    gain = torch.exp(torch.empty(count).uniform_(*bounds, generator=g))
    return cols, gain


def model_like(m: int, n: int, k: int, seed: int, device: str | torch.device = "cuda"):
    """(A, B) bf16 [m, k] and [n, k] drawn as described in the module docstring."""
    device = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g) * torch.exp(torch.randn(m, 1, generator=g))
    cols, gain = _outliers(g, k, 20.0, 200.0)
    a[:, cols] *= gain
    b = torch.randn(n, k, generator=g) * torch.exp(0.5 * torch.randn(n, 1, generator=g))
    cols, gain = _outliers(g, k, 8.0, 50.0)
    b[:, cols] *= gain
    return a.to(torch.bfloat16).to(device), b.to(torch.bfloat16).to(device)


def heavy_tailed(m: int, n: int, k: int, seed: int, device: str | torch.device = "cuda"):
    """(A, B) bf16 [m, k] and [n, k]: Student-t (2 dof) activations with per-channel and per-token
    scales, weights randn with per-row scales (the module docstring)."""
    device = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    chi = -torch.log(torch.rand(m, k, generator=g).clamp_(min=2.0 ** -60))  # chi-square(2) / 2
    a = (torch.randn(m, k, generator=g) / chi.sqrt() * torch.exp(1.25 * torch.randn(1, k, generator=g))
         * torch.exp(torch.randn(m, 1, generator=g)))
    b = torch.randn(n, k, generator=g) * torch.exp(0.5 * torch.randn(n, 1, generator=g))
    return a.to(torch.bfloat16).to(device), b.to(torch.bfloat16).to(device)


def task_data(m: int, n: int, k: int, seed: int, data: str = "randn", device: str | torch.device = "cuda"):
    """The task's tuple (A, B, B_q, B_shuffle, B_scale_sh) on data set ``data`` (one of DATA_SETS)."""
    if data == "randn":
        return task.generate_input(m, n, k, seed, device)
    if data not in DATA_SETS:
        raise ValueError(f"data must be one of {DATA_SETS}, got {data!r}")
    a, b = (model_like if data == "model" else heavy_tailed)(m, n, k, seed, device)
    bq = quantize(b)
    return a, b, bq.data, layouts.shuffle_weight(bq.data), layouts.shuffle_scales(bq.scales)


def shuffled_weight(data) -> MXFP4Tensor:
    """The task tuple's weight (B_shuffle, B_scale_sh) as an MXFP4Tensor (no copy)."""
    _, b, _, b_shuffle, b_scale = data
    return MXFP4Tensor(b_shuffle, b_scale, tuple(b.shape), Layout.AITER_SHUFFLED)
