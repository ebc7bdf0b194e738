"""Tensor-parallel MXFP4 linear layers on torch.distributed.

Both layers split their dimension with :func:`shard_range`: ``size`` in 32-element units (32 rows
of N for column-parallel, one 32-element block of K for row-parallel; the last unit may be short),
as evenly as whole units allow (the last ranks take one unit more). Every rank computes its range
from (rank, world_size, size) alone, and a column-parallel layer's output shard is exactly the
input shard of a row-parallel layer of the same size (the Megatron MLP pairing). Shard boundaries
are therefore on 16-row groups of N (the kernels' layout) and on blocks of K; a shard whose K is
not a multiple of 64, or whose N is not a multiple of 16, is padded with zero blocks by
:func:`mxfp4.tensor.prepare` as any weight is.

ColumnParallelMXFP4Linear holds rows ``shard_range(N, rank, W)`` of the weight W [N, K] (output
features). Output elements are independent, and each rank's shard runs with the kernel parameters
the unsharded problem would get. On the CPU (the exact reference) the gathered output is the
one-process layer's bit for bit. On a Hopper GPU it is too wherever the kernel decides nothing by
weight rows beyond the shard's: the short-K kernel and the decode kernels (not the streaming GEMM,
whose cut of K between CTAs follows N's tiles), and for the large-M kernels when every shard boundary is a multiple of 64 rows (the converting kernel on 64-token
tiles folds per 64-row group) or of 128 rows (on 128-token tiles, and the int8-weight kernel above 512
rows, per 128-row tile); :func:`column_bits_kept`
says which. Elsewhere a shard's groups differ from the unsharded weight's, so an output can differ
from the one-process layer's in its last bits: always within the kernels' contract
(``ulp_bf16 + (K/32) * 2**-24 * sum|a w|`` of the exact product) and the same bits from call to call.

RowParallelMXFP4Linear holds columns ``shard_range(K, rank, W)`` of the weight (input features,
on 32-element block boundaries, the scales with them) and takes the same K-shard of the activation.
Activations are quantized per 32-element block along K, so quantizing the shard gives the codes
and scales the whole row would get. Each rank computes its partial sum unrounded, as float32
(:func:`mxfp4.ops.gemm_a4w4_partial`: on a Hopper GPU the kernels' own total, the ``out_f32``
variants; on the CPU the exact partial rounded once to float32); the partials are gathered and
added in rank order in float32 on every rank, and the total is rounded to bf16 once. Every rank
adds the same float32 numbers in the same order: the same bits on every rank and from call to call.
At world size 1 the total is the one partial, and the kernel rounds it in its own epilogue: the
one-process layer's call and bits.

The result is within the kernels' contract of the one-process product: for one output, with
``m = sum |a_k w_k|`` over the whole row and ``m_r`` over rank r's part, rank r's partial is within
``(K_r/32) * 2**-24 * m_r`` of its exact value (at most K_r/32 float32 roundings of exact block
terms), and the rank-order sum adds W - 1 roundings of at most ``2**-24 * m`` each, so the total is
within ``(max_r K_r/32 + W - 1) * 2**-24 * m <= (K/32) * 2**-24 * m`` (every rank holds at least one
block, so ``K/32 >= max_r K_r/32 + W - 1``), and the one bf16 rounding adds ``ulp_bf16``. It is not
bit for bit the one-process output: that rounds a different float32 total (the kernels) or the
exact product (the CPU reference), and the two differ where the product lies within a few float32
ulps of a bf16 rounding boundary (tests/test_distributed.py measures how often, and builds a
cancelling row where the float32 partial loses the whole result, as the one-process kernel does).
Rounding each partial to bf16 and all-reducing instead leaves the bound: two or more bf16
roundings of partials that can be far larger than the total.

Inference only: the weights are buffers and the collectives are not differentiated.
"""
from __future__ import annotations

import dataclasses
import fnmatch
from typing import Mapping

import torch
import torch.distributed as dist
from torch import nn

from . import ops, plan
from .formats import BLOCK
from .nn import MXFP4Linear
from .tensor import Layout, MXFP4Tensor, applied_dtype, prepare

SHARD_UNIT = 32
"""Elements of a shard's dimension per unit of :func:`shard_range`: one 32-element block of K (the
scales go with their blocks), and for N two of the layout's 16-row groups, so that a column-parallel
layer's output shard is the next row-parallel layer's input shard."""


def sum_in_rank_order(partials: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``((p0 + p1) + p2) + ...`` of float32 partials, in float32: the fixed order every rank uses, so
    every rank gets the same bits (a new tensor; the partials are left as they are)."""
    total = partials[0].clone()
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
    """Rows n0:n1, columns k0:k1 (on 32-element block boundaries) of w with their scales, prepared
    (padded by prepare where the shard's N or K needs it)."""
    plain = w.to_layout(Layout.PLAIN)
    return prepare(MXFP4Tensor(plain.data[n0:n1, k0 // 2:k1 // 2].contiguous(),
                               plain.scales[n0:n1, k0 // BLOCK:k1 // BLOCK].contiguous(), (n1 - n0, k1 - k0),
                               Layout.PLAIN, w.scale_rule))


def shard_range(size: int, rank: int, world_size: int, name: str = "size") -> tuple[int, int]:
    """``[start, end)``: rank ``rank``'s part of a dimension of ``size`` elements split ``world_size`` ways.

    ``size`` is cut into ``ceil(size / 32)`` units of :data:`SHARD_UNIT` elements (the last one
    short when size % 32 != 0); rank r takes ``units // W`` of them, plus one for the last
    ``units % W`` ranks (which hold the short unit), in rank order, so shards differ by at most 32. Equal to ``[r*size/W, (r+1)*size/W)`` when
    size % (W * 32) == 0. Needs at least one unit per rank; ``name`` names the dimension in the error.
    """
    _check_rank(rank, world_size)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise TypeError(f"{name} must be a non-negative int, got {size!r}")
    units = -(-size // SHARD_UNIT)
    if units < world_size:
        raise ValueError(f"{name} ({size}) must hold at least world_size ({world_size}) units of {SHARD_UNIT} "
                         f"(one per rank; shards split on {SHARD_UNIT}-element boundaries), it holds {units}")
    base, extra = divmod(units, world_size)
    first_long = world_size - extra
    start = SHARD_UNIT * (rank * base + max(0, rank - first_long))
    return start, min(size, start + SHARD_UNIT * (base + (rank >= first_long)))


def shard_columns(w: MXFP4Tensor, rank: int, world_size: int) -> MXFP4Tensor:
    """Rows ``shard_range(N, rank, world_size)`` of a weight [N, K] (one rank's output features), prepared."""
    _check_weight(w)
    n, k = w.shape
    n0, n1 = shard_range(n, rank, world_size, "column parallel: weight N")
    return _slice(w, n0, n1, 0, k)


def shard_rows(w: MXFP4Tensor, rank: int, world_size: int) -> MXFP4Tensor:
    """Columns ``shard_range(K, rank, world_size)`` of a weight [N, K] (one rank's input features, whole
    32-element blocks) and their scales, prepared."""
    _check_weight(w)
    n, k = w.shape
    k0, k1 = shard_range(k, rank, world_size, "row parallel: weight K")
    return _slice(w, 0, n, k0, k1)


def shard_input(x: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """The K-shard ``x[..., shard_range(K, rank, world_size)]`` a row-parallel rank takes (a view)."""
    k0, k1 = shard_range(x.shape[-1], rank, world_size, "x.shape[-1]")
    return x[..., k0:k1]


def column_bits_kept(n: int, world_size: int, params) -> bool:
    """Whether column-parallel shards of an N-row weight give the one-process layer's bits under the
    kernel parameters ``params`` (those of the unsharded problem, ``ops.params_for``; None for the
    exact reference, which always does). The short-K and decode kernels (``plan.SmallParams``,
    ``plan.DecodeParams``) decide nothing by row groups; the streaming and banded GEMMs
    (``plan.StreamParams``, ``plan.BandParams``) cut K between CTAs where N's tiles and the SM count fall,
    so a shard may add a tile's blocks in other groups (and the banded GEMM's W-loose blocks are its
    warpgroup's 64 rows'); the large-M kernels fold per 64-row group (64-token tiles of the converting GEMM, a
    consumer warpgroup's rows) or 128-row tile, so every shard boundary must be a multiple of that.
    Where this is False the outputs are within the kernels' contract and deterministic, and may
    differ in their last bits."""
    if params is None or isinstance(params, (plan.SmallParams, plan.DecodeParams)):
        return True
    if isinstance(params, (plan.StreamParams, plan.BandParams)):
        return False
    rows = 64 if params.tn == 64 and not params.int8_weight else 128
    return all(shard_range(n, r, world_size)[0] % rows == 0 for r in range(world_size))


def _column_gemm(x: torch.Tensor, w: MXFP4Tensor, full_n: int, bias: torch.Tensor | None) -> torch.Tensor:
    """The shard's output columns (+ its bias, before the rounding) computed as the unsharded layer computes them.

    On a Hopper GPU the kernel parameters (the split of K over a cluster, the run length) decide
    the order of the float additions, so the shard gets the parameters of the unsharded problem.
    """
    if ops.select_backend(x, w) != "cuda" or x.numel() == 0:
        return ops.gemm_a4w4(x, w, bias=bias)
    k = w.shape[1]
    return ops.gemm_a4w4(x, w, params=ops.params_for(plan.Problem(x.numel() // k, full_n, k), x.device), bias=bias)


STYLES = ("column", "row")


@dataclasses.dataclass(frozen=True)
class TensorParallel:
    """Which MXFP4 linears of a model a checkpoint load shards, and this rank's place in the group.

    ``rules`` maps ``fnmatch`` patterns of module names (``"*.up_proj"``) to ``"column"`` (a
    :class:`ColumnParallelMXFP4Linear`, output not gathered) or ``"row"`` (a
    :class:`RowParallelMXFP4Linear`, input already sharded); the first pattern that matches a
    layer's name decides, in the mapping's order, and a layer no pattern matches is loaded whole
    (replicated). ``rank`` and ``world_size`` default to those of ``group`` (the default process
    group). Used as ``mxfp4.quantize_(model, checkpoint=dir, tp=TensorParallel(...))``.
    """

    rules: Mapping[str, str]
    rank: int | None = None
    world_size: int | None = None
    group: dist.ProcessGroup | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rules, Mapping) or not self.rules:
            raise TypeError(f"TensorParallel.rules must be a non-empty mapping of name patterns to 'column' or "
                            f"'row', got {self.rules!r}")
        for pattern, style in self.rules.items():
            if not isinstance(pattern, str) or style not in STYLES:
                raise ValueError(f"TensorParallel.rules[{pattern!r}] = {style!r}: each rule maps a name pattern "
                                 "(str, fnmatch) to 'column' or 'row'")
        object.__setattr__(self, "rules", dict(self.rules))

    def style(self, name: str) -> str | None:
        """``"column"``, ``"row"`` or None (replicated) for the module named ``name``."""
        return next((style for pattern, style in self.rules.items() if fnmatch.fnmatchcase(name, pattern)), None)

    def place(self) -> tuple[int, int]:
        """(rank, world_size), checked."""
        return _rank_and_world(self.rank, self.world_size, self.group)


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
        shard = prepare(shard)  # a plain shard (a checkpoint's rows or columns) takes the kernels' layout here
        self.layout, self.scale_rule = shard.layout, shard.scale_rule
        self.shard_shape = tuple(shard.shape)
        self.register_buffer("weight_data", shard.data)
        self.register_buffer("weight_scales", shard.scales)
        if bias is not None:
            self.bias = nn.Parameter(bias.detach().to(torch.bfloat16), requires_grad=False)
        else:
            self.register_parameter("bias", None)

    def _apply(self, fn, recurse=True):
        applied_dtype(fn, torch.bfloat16, type(self).__name__, (torch.bfloat16,))  # the layers compute in bf16
        return super()._apply(fn, recurse)

    @property
    def weight(self) -> MXFP4Tensor:
        """This rank's shard of the weight."""
        return MXFP4Tensor(self.weight_data, self.weight_scales, self.shard_shape, self.layout, self.scale_rule)

    def kept_bytes(self) -> int:
        """Bytes this rank keeps for its shard: the prepared (padded) MXFP4 codes and scale bytes."""
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

    ``x`` is the full input [..., K] on every rank; the shard is rows ``shard_range(N, rank, W)``.
    Output columns are independent and computed with the unsharded problem's kernel parameters: the
    one-process :class:`~mxfp4.nn.MXFP4Linear`'s bits on the CPU, and on a GPU where
    :func:`column_bits_kept` says so, else within the kernels' contract (module docstring).
    """

    def __init__(self, shard: MXFP4Tensor, bias: torch.Tensor | None, *, out_features: int, rank: int,
                 world_size: int, gather_output: bool = False, group: dist.ProcessGroup | None = None) -> None:
        _check_weight(shard)
        n0, n1 = shard_range(out_features, rank, world_size, "out_features")
        if shard.shape[0] != n1 - n0:
            raise ValueError(f"shard has {shard.shape[0]} rows; rank {rank} of {world_size} holds rows [{n0}, {n1}) "
                             f"of out_features ({out_features}) (shard_range)")
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
            n0, n1 = shard_range(n, rank, world_size)
            bias = bias[n0:n1]
        return cls(shard, bias, out_features=n, rank=rank, world_size=world_size, gather_output=gather_output,
                   group=group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _column_gemm(x, self.weight, self.out_features, self.bias)
        if self.gather_output and self.world_size > 1:
            # all_gather takes equal sizes: every shard padded to the widest, then cut back
            widths = [b - a for a, b in (shard_range(self.out_features, r, self.world_size)
                                         for r in range(self.world_size))]
            y = torch.nn.functional.pad(y, (0, max(widths) - y.shape[-1]))
            y = torch.cat([part[..., :w] for part, w in zip(self._gather(y), widths)], dim=-1)
        return y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"(rank {self.rank}: {self.shard_shape[0]}), world_size={self.world_size}, "
                f"gather_output={self.gather_output}, bias={self.bias is not None}")


class RowParallelMXFP4Linear(_ShardedMXFP4Linear):
    """y = bf16(sum over ranks, in rank order, of float32 partials (+ bias, in float32)), the same on every rank.

    ``x`` is this rank's K-shard [..., shard_range(K)] (``input_is_parallel``, the output of a column-parallel
    layer without gather) or the full input [..., K]. Each partial is :func:`mxfp4.ops.gemm_a4w4_partial`
    (the kernels' unrounded float32 total on a Hopper GPU); the output is within the kernels' contract of
    the one-process product (module docstring).
    """

    def __init__(self, shard: MXFP4Tensor, bias: torch.Tensor | None, *, in_features: int, rank: int,
                 world_size: int, input_is_parallel: bool = True, group: dist.ProcessGroup | None = None) -> None:
        _check_weight(shard)
        k0, k1 = shard_range(in_features, rank, world_size, "in_features")
        if shard.shape[1] != k1 - k0:
            raise ValueError(f"shard has K = {shard.shape[1]}; rank {rank} of {world_size} holds inputs [{k0}, {k1}) "
                             f"of in_features ({in_features}) (shard_range)")
        _check_bias(bias, shard.shape[0])
        super().__init__(shard, bias, rank, world_size, group)
        self.in_features, self.out_features = in_features, shard.shape[0]
        self.input_is_parallel = input_is_parallel

    @classmethod
    def from_mxfp4(cls, weight: MXFP4Tensor, bias: torch.Tensor | None = None, *, rank: int | None = None,
                   world_size: int | None = None, input_is_parallel: bool = True,
                   group: dist.ProcessGroup | None = None) -> "RowParallelMXFP4Linear":
        """This rank's layer from the full weight [N, K] (and bias [N], added once after the sum)."""
        rank, world_size = _rank_and_world(rank, world_size, group)
        return cls(shard_rows(weight, rank, world_size), bias, in_features=weight.shape[1], rank=rank,
                   world_size=world_size, input_is_parallel=input_is_parallel, group=group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = shard_input(x, self.rank, self.world_size)
        if self.world_size == 1:  # the total is this rank's partial: the kernel's epilogue rounds it once
            y = ops.gemm_a4w4(x, self.weight, bias=self.bias)
            if self.out_features % 16:
                y = y.contiguous()  # a layer's output is dense (gemm_a4w4 gives N of N16 columns)
            return y
        total = sum_in_rank_order(self._gather(ops.gemm_a4w4_partial(x, self.weight)))
        if self.bias is not None:  # added to the float32 total, then the one rounding
            return ops.add_bias(total, self.bias, torch.bfloat16)
        return total.to(torch.bfloat16)  # the one rounding, to nearest even as the kernels' epilogue

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} (rank {self.rank}: {self.shard_shape[1]}), "
                f"out_features={self.out_features}, world_size={self.world_size}, "
                f"input_is_parallel={self.input_is_parallel}, bias={self.bias is not None}")


__all__ = ["ColumnParallelMXFP4Linear", "RowParallelMXFP4Linear", "TensorParallel", "shard_range", "shard_columns", "shard_rows",
           "shard_input", "column_bits_kept", "sum_in_rank_order", "SHARD_UNIT"]

