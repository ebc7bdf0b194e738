"""Tensor-parallel MXFP4 linear layers on torch.distributed, bit-identical to the one-process layer.

ColumnParallelMXFP4Linear holds rows ``[r*N/W, (r+1)*N/W)`` of the weight W [N, K] (output
features): output elements are independent, and each rank computes its columns as the unsharded
layer does (on the GPU with the kernel parameters the unsharded problem would get), so the
gathered output has the same bits.

RowParallelMXFP4Linear holds columns ``[r*K/W, (r+1)*K/W)`` of the weight (input features, on
32-element block boundaries, the scales with them) and takes the same K-shard of the activation.
Activations are quantized per 32-element block along K, so quantizing the shard gives the codes
and scales the whole row would get. Each rank computes its unrounded float64 partial sum; the
partials are gathered and added in rank order on every rank (deterministic, the same bits on
every rank) and rounded to bf16 once. Rounding each partial to bf16 and all-reducing would add
two or more roundings and does differ from the one-process layer.

When the row-parallel result equals the one-process reference bit for bit. For one output
element write the block terms ``t_b = S_b * 2**(sa_b + sw_b - 256)`` (``S_b`` the integer dot
product of the doubled e2m1 codes of block b, ``|S_b| <= 4608``; ``sa_b``, ``sw_b`` the e8m0
bytes). The reference rounds the exact sum of the terms once; each rank's partial is its terms'
sum in float64 (exact, or kept to 53 bits with a sticky bit), and the partials are added in rank
order in float64. Every term and every partial sum is a multiple of
``q = 2**(min over S_b != 0 of sa_b + sw_b - 256)``, so all of those additions are exact, and the
result equals the exact sum, whenever

    sum_b |S_b| * 2**(sa_b + sw_b - e_min) < 2**53,      e_min = min over S_b != 0 of sa_b + sw_b

(:func:`split_k_exact` evaluates it). The condition is sufficient, not necessary: it ignores
the trailing zero bits of ``S_b``, and many inexact sums still round alike. A simpler sufficient
form: the scale exponents of the row's blocks with nonzero products span
``e_max - e_min < 53 - log2(144 * K)`` binary orders, i.e. at most 33 for K = 7168 and 31 for
K = 16384 (randn operands span at most 4: each row's block scales lie within 2 orders).
Outside the condition the rank-order float64 sum can round (each addition by at most half a
float64 ulp, 2**-53 relative), which changes the bf16 output only when the sum lies that close to
a bf16 rounding boundary (``tests/test_distributed.py`` builds such a row). NaN scale bytes give NaN either way.

On the CPU both layers run the exact reference, so the statement above is the whole story. On a
Hopper GPU the one-process layer runs the CUDA kernel, whose result equals the exact product
rounded to bf16 on model-like data (docs/design.md); the row-parallel partial runs the float64
reference on the GPU (slow: a bmm and a Python loop over blocks), so it equals the kernel
wherever the kernel equals the exact rounding. The partial GEMM is one function
(``partial_gemm``, default :func:`reference_partial`) so a float64-output kernel can replace it.

Inference only: the weights are buffers and the collectives are not differentiated.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from torch import nn

from . import formats, ops, plan, reference
from .formats import BLOCK
from .nn import MXFP4Linear
from .tensor import Layout, MXFP4Tensor, prepare

PartialGemm = Callable[[torch.Tensor, MXFP4Tensor], torch.Tensor]
"""``(a [..., K_shard], w [N, K_shard]) -> float64 [..., N]``: the unrounded sum of the shard's block products."""

COLUMN_MULTIPLE = 64
"""Rows of the weight per rank must be a multiple of this: the large-M register kernel (M <= 256)
decides per 64-row group of the weight which blocks of a segment fold (which changes the float32
rounding), so a shard's groups must be the unsharded weight's for its outputs to keep their bits.
The int8-weight kernel (M > 256) decides per 128-row tile: there a shard of an odd number of
64-row groups can differ from the one-process output in the last bit, inside the kernels' bound."""

ROW_MULTIPLE = 64
"""Inputs per rank must be a multiple of this (two 32-element blocks: one packed 32-byte chunk)."""


def reference_partial(a: torch.Tensor, w: MXFP4Tensor) -> torch.Tensor:
    """The exact reference's float64 sum of the block products, before the bf16 rounding (any device;
    slow on the GPU)."""
    return reference.gemm_a4w4(a, w, scale_rule=w.scale_rule, out_dtype=None)


def sum_in_rank_order(partials: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``((p0 + p1) + p2) + ...`` in float64: the fixed order every rank uses, so every rank gets the same bits."""
    total = partials[0].to(torch.float64, copy=True)
    for p in partials[1:]:
        total += p
    return total


def _check_rank(rank: int, world_size: int) -> None:
    for name, value in (("rank", rank), ("world_size", world_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size) = [0, {world_size}), got {rank}")


def _check_weight(w: MXFP4Tensor) -> None:
    if not isinstance(w, MXFP4Tensor):
        raise TypeError(f"weight must be an MXFP4Tensor, got {type(w).__name__}")
    if len(w.shape) != 2:
        raise ValueError(f"weight must be a 2-D MXFP4Tensor [N, K], got shape {w.shape}")


def _slice(w: MXFP4Tensor, n0: int, n1: int, k0: int, k1: int) -> MXFP4Tensor:
    """Rows n0:n1, columns k0:k1 (on 32-element block boundaries) of w, with their scales; prepared
    for the kernels where the shape allows it."""
    plain = w.to_layout(Layout.PLAIN)
    shard = MXFP4Tensor(plain.data[n0:n1, k0 // 2:k1 // 2].contiguous(),
                        plain.scales[n0:n1, k0 // BLOCK:k1 // BLOCK].contiguous(), (n1 - n0, k1 - k0),
                        Layout.PLAIN, w.scale_rule)
    return prepare(shard) if (n1 - n0) % 16 == 0 and (k1 - k0) % 64 == 0 else shard


def _rank_range(size: int, name: str, multiple: int, rank: int, world_size: int, why: str = "") -> tuple[int, int]:
    """``[rank*size/W, (rank+1)*size/W)``, after checking the rank and that size % (W * multiple) == 0."""
    _check_rank(rank, world_size)
    if size % (world_size * multiple):
        raise ValueError(f"{name} ({size}) must be a multiple of world_size * {multiple} = {world_size * multiple}"
                         + (f" ({why})" if why else ""))
    return rank * size // world_size, (rank + 1) * size // world_size


def shard_columns(w: MXFP4Tensor, rank: int, world_size: int) -> MXFP4Tensor:
    """Rows ``[rank*N/W, (rank+1)*N/W)`` of a weight [N, K] (the output features of one rank), prepared.

    Needs N % (world_size * 64) == 0 (``COLUMN_MULTIPLE``), so each shard's 64-row groups are the
    unsharded weight's.
    """
    _check_weight(w)
    n, k = w.shape
    n0, n1 = _rank_range(n, "column parallel: weight N", COLUMN_MULTIPLE, rank, world_size,
                         "each rank's rows whole 64-row groups of the weight")
    return _slice(w, n0, n1, 0, k)


def shard_rows(w: MXFP4Tensor, rank: int, world_size: int) -> MXFP4Tensor:
    """Columns ``[rank*K/W, (rank+1)*K/W)`` of a weight [N, K] (one rank's input features) and their scales, prepared.

    Needs K % (world_size * 64) == 0: shards on 32-element block boundaries, each a whole number of
    the layout's 64-element (32-byte) chunks.
    """
    _check_weight(w)
    n, k = w.shape
    k0, k1 = _rank_range(k, "row parallel: weight K", ROW_MULTIPLE, rank, world_size,
                         "each rank's K on block and 32-byte chunk boundaries")
    return _slice(w, 0, n, k0, k1)


def shard_input(x: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """The K-shard ``x[..., rank*K/W:(rank+1)*K/W]`` a row-parallel rank takes (a view)."""
    k0, k1 = _rank_range(x.shape[-1], "x.shape[-1]", ROW_MULTIPLE, rank, world_size)
    return x[..., k0:k1]


def split_k_exact(a: torch.Tensor, w: MXFP4Tensor) -> torch.Tensor:
    """Bool [..., N]: where the float64 sum of block terms is exact in every order (see the module docstring).

    There the row-parallel layer equals the one-process reference bit for bit, for any world size.
    A check for data, not for the forward path: it holds [K/32, M, N] float64 in memory.
    """
    lead, k = a.shape[:-1], a.shape[-1]
    a2 = a.reshape(-1, k)
    codes, a_bytes = formats.quantize_codes(a2, w.scale_rule)
    plain = w.to_layout(Layout.PLAIN)
    a_vals = (formats.e2m1_to_float(codes, torch.float64) * 2).reshape(a2.shape[0], -1, BLOCK)
    w_vals = (formats.e2m1_to_float(formats.unpack_codes(plain.data), torch.float64) * 2).reshape(w.shape[0], -1,
                                                                                                 BLOCK)
    sums = torch.bmm(a_vals.permute(1, 0, 2), w_vals.permute(1, 2, 0)).abs()  # [nb, M, N], exact integers
    e = a_bytes.t().to(torch.int64).unsqueeze(-1) + plain.scales.t().to(torch.int64).unsqueeze(1)  # [nb, M, N]
    nan = ((a_bytes == formats.E8M0_NAN).any(-1).unsqueeze(-1)
           | (plain.scales == formats.E8M0_NAN).any(-1).unsqueeze(0))
    return (reference.float64_sum_exact(sums, e) | nan).reshape(*lead, w.shape[0])


def _column_gemm(x: torch.Tensor, w: MXFP4Tensor, full_n: int) -> torch.Tensor:
    """The shard's output columns computed as the unsharded layer computes them.

    On a Hopper GPU the kernel parameters (the split of K over a cluster, the run length) decide
    the order of the float additions, so the shard gets the parameters of the unsharded problem.
    """
    if ops.select_backend(x, w) != "cuda" or x.numel() == 0:
        return ops.gemm_a4w4(x, w)
    k = w.shape[1]
    return ops.gemm_a4w4(x, w, params=ops.params_for(plan.Problem(x.numel() // k, full_n, k), x.device))


class _ShardedMXFP4Linear(nn.Module):
    """One rank's weight shard in two buffers (like MXFP4Linear), its place in the group, and the bias."""

    @classmethod
    def from_layer(cls, layer: MXFP4Linear, **kwargs):
        """This rank's layer from a full :class:`~mxfp4.nn.MXFP4Linear` (keywords as the class's ``from_mxfp4``)."""
        if not isinstance(layer, MXFP4Linear):
            raise TypeError(f"layer must be a mxfp4.nn.MXFP4Linear, got {type(layer).__name__}")
        return cls.from_mxfp4(layer.weight, layer.bias, **kwargs)

    def __init__(self, shard: MXFP4Tensor, bias: torch.Tensor | None, rank: int, world_size: int,
                 group: dist.ProcessGroup | None) -> None:
        super().__init__()
        self.rank, self.world_size, self.group = rank, world_size, group
        self.layout, self.scale_rule = shard.layout, shard.scale_rule
        self.shard_shape = tuple(shard.shape)
        self.register_buffer("weight_data", shard.data)
        self.register_buffer("weight_scales", shard.scales)
        if bias is not None:
            self.bias = nn.Parameter(bias.detach().to(torch.bfloat16), requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @property
    def weight(self) -> MXFP4Tensor:
        """This rank's shard of the weight."""
        return MXFP4Tensor(self.weight_data, self.weight_scales, self.shard_shape, self.layout, self.scale_rule)

    def kept_bytes(self) -> int:
        return self.weight_data.numel() + self.weight_scales.numel()

    def _gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        parts = [torch.empty_like(t) for _ in range(self.world_size)]
        dist.all_gather(parts, t.contiguous(), group=self.group)
        return parts


def _rank_and_world(rank: int | None, world_size: int | None, group) -> tuple[int, int]:
    if rank is None:
        rank = dist.get_rank(group)
    if world_size is None:
        world_size = dist.get_world_size(group)
    _check_rank(rank, world_size)
    return rank, world_size


def _check_bias(bias: torch.Tensor | None, n: int) -> None:
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (n,)):
        raise ValueError(f"bias must be a tensor of shape ({n},), got {getattr(bias, 'shape', type(bias).__name__)}")


class ColumnParallelMXFP4Linear(_ShardedMXFP4Linear):
    """y[..., shard] = quant(x) @ dequant(W[shard])^T (+ bias[shard]); with ``gather_output`` all N columns.

    ``x`` is the full input [..., K] on every rank. Output columns are independent and computed as
    the unsharded :class:`~mxfp4.nn.MXFP4Linear` computes them, so the gathered output has its bits.
    """

    def __init__(self, shard: MXFP4Tensor, bias: torch.Tensor | None, *, out_features: int, rank: int,
                 world_size: int, gather_output: bool = False, group: dist.ProcessGroup | None = None) -> None:
        _check_weight(shard)
        _check_rank(rank, world_size)
        if shard.shape[0] * world_size != out_features:
            raise ValueError(f"shard has {shard.shape[0]} rows; world_size ({world_size}) shards make "
                             f"{shard.shape[0] * world_size}, not out_features ({out_features})")
        _check_bias(bias, shard.shape[0])
        super().__init__(shard, bias, rank, world_size, group)
        self.in_features, self.out_features = shard.shape[1], out_features
        self.gather_output = gather_output

    @classmethod
    def from_mxfp4(cls, weight: MXFP4Tensor, bias: torch.Tensor | None = None, *, rank: int | None = None,
                   world_size: int | None = None, gather_output: bool = False,
                   group: dist.ProcessGroup | None = None) -> "ColumnParallelMXFP4Linear":
        """This rank's layer from the full weight [N, K] (and bias [N]).

        ``rank`` and ``world_size`` default to those of ``group`` (the default process group).
        """
        rank, world_size = _rank_and_world(rank, world_size, group)
        shard = shard_columns(weight, rank, world_size)
        n = weight.shape[0]
        _check_bias(bias, n)
        if bias is not None:
            rows = shard.shape[0]  # N / world_size, checked by shard_columns
            bias = bias[rank * rows:(rank + 1) * rows]
        return cls(shard, bias, out_features=n, rank=rank, world_size=world_size, gather_output=gather_output,
                   group=group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _column_gemm(x, self.weight, self.out_features)
        if self.bias is not None:
            y = y + self.bias
        if self.gather_output and self.world_size > 1:
            y = torch.cat(self._gather(y), dim=-1)
        return y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"(rank {self.rank}: {self.shard_shape[0]}), world_size={self.world_size}, "
                f"gather_output={self.gather_output}, bias={self.bias is not None}")


class RowParallelMXFP4Linear(_ShardedMXFP4Linear):
    """y = round_bf16(sum over ranks, in rank order, of float64 partials) (+ bias), the same on every rank.

    ``x`` is this rank's K-shard [..., K/W] (``input_is_parallel``, the output of a column-parallel
    layer without gather) or the full input [..., K]. Bit-identical to the unsharded layer's
    reference result under the condition in the module docstring (:func:`split_k_exact`).
    ``partial_gemm`` computes the unrounded float64 partial (default: the exact reference).
    """

    def __init__(self, shard: MXFP4Tensor, bias: torch.Tensor | None, *, in_features: int, rank: int,
                 world_size: int, input_is_parallel: bool = True, group: dist.ProcessGroup | None = None,
                 partial_gemm: PartialGemm = reference_partial) -> None:
        _check_weight(shard)
        _check_rank(rank, world_size)
        if shard.shape[1] * world_size != in_features:
            raise ValueError(f"shard has K = {shard.shape[1]}; world_size ({world_size}) shards make "
                             f"{shard.shape[1] * world_size}, not in_features ({in_features})")
        _check_bias(bias, shard.shape[0])
        if not callable(partial_gemm):
            raise TypeError(f"partial_gemm must be callable (a, w) -> float64, got {partial_gemm!r}")
        super().__init__(shard, bias, rank, world_size, group)
        self.in_features, self.out_features = in_features, shard.shape[0]
        self.input_is_parallel = input_is_parallel
        self.partial_gemm = partial_gemm

    @classmethod
    def from_mxfp4(cls, weight: MXFP4Tensor, bias: torch.Tensor | None = None, *, rank: int | None = None,
                   world_size: int | None = None, input_is_parallel: bool = True,
                   group: dist.ProcessGroup | None = None,
                   partial_gemm: PartialGemm = reference_partial) -> "RowParallelMXFP4Linear":
        """This rank's layer from the full weight [N, K] (and bias [N], added once after the sum)."""
        rank, world_size = _rank_and_world(rank, world_size, group)
        return cls(shard_rows(weight, rank, world_size), bias, in_features=weight.shape[1], rank=rank,
                   world_size=world_size, input_is_parallel=input_is_parallel, group=group,
                   partial_gemm=partial_gemm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = shard_input(x, self.rank, self.world_size)
        w = self.weight
        ops.validate(x, w, None)
        partial = self.partial_gemm(x, w)
        if partial.dtype != torch.float64:
            raise TypeError(f"partial_gemm must return float64 (the unrounded sum), got {partial.dtype}")
        total = sum_in_rank_order(self._gather(partial)) if self.world_size > 1 else partial
        y = reference.round_to_bf16(total)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} (rank {self.rank}: {self.shard_shape[1]}), "
                f"out_features={self.out_features}, world_size={self.world_size}, "
                f"input_is_parallel={self.input_is_parallel}, bias={self.bias is not None}")


__all__ = ["ColumnParallelMXFP4Linear", "RowParallelMXFP4Linear", "shard_columns", "shard_rows", "shard_input",
           "split_k_exact", "reference_partial", "sum_in_rank_order", "PartialGemm"]


if __name__ == "__main__":
    import sys

    from .bench.distributed import main

    sys.exit(main())
