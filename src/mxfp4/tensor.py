"""The packed MXFP4 tensor type, and quantize / dequantize."""
from __future__ import annotations

import dataclasses
import enum
import functools

import torch

from . import formats, layouts
from .device import cuda_supported
from .formats import BLOCK, ScaleRule


class Layout(enum.Enum):
    """Memory layout of an :class:`MXFP4Tensor`'s data and scales.

    PLAIN: data [..., K/2] row-major, scales [..., K/32].
    AITER_SHUFFLED: 2-D only; the weight padded to N16 = ceil(N/16)*16 rows and K64 = ceil(K/64)*64
        columns (zero codes, scale byte 127: the padding's blocks are zero), data [N16, K64/2] in
        aiter's (16, 16) weight shuffle, scales in aiter's e8m0 shuffle, padded to
        [ceil(N/256)*256, ceil(K/32/8)*8]. The logical shape stays (N, K).
    """

    PLAIN = "plain"
    AITER_SHUFFLED = "aiter_shuffled"


@dataclasses.dataclass(frozen=True, init=False)
class MXFP4Tensor:
    """MXFP4 data with its e8m0 scales, logical shape (..., K), layout and scale rule.

    Validated on construction: a tensor that exists is consistent.
    """

    data: torch.Tensor
    scales: torch.Tensor
    shape: tuple[int, ...]
    layout: Layout = Layout.PLAIN
    scale_rule: ScaleRule = ScaleRule.AITER

    def __init__(self, data: torch.Tensor, scales: torch.Tensor, shape: tuple[int, ...],
                 layout: Layout = Layout.PLAIN, scale_rule: ScaleRule = ScaleRule.AITER) -> None:
        # Built on every custom_kernel and torch-op call. The fields in one write (the dataclass's
        # __init__, an object.__setattr__ a field, took 0.45 us more); the common case (a 2-D int shape,
        # uint8 tensors of the shapes its layout wants, on one device) checked first, in a few reads; the
        # checks below name the broken rule. A construction took 1.5 us against 2.9 us before (CPU).
        self.__dict__.update(data=data, scales=scales, shape=shape, layout=layout, scale_rule=scale_rule)
        if (type(shape) is tuple and len(shape) == 2 and type(shape[0]) is int and type(shape[1]) is int
                and type(layout) is Layout and isinstance(scale_rule, ScaleRule)
                and isinstance(data, torch.Tensor) and isinstance(scales, torch.Tensor)
                and data.dtype is torch.uint8 and scales.dtype is torch.uint8):
            want = _stored_shapes(shape, layout)
            if want is not None and data.shape == want[0] and scales.shape == want[1] and data.device == scales.device:
                return
        if type(shape) is not tuple or not all(type(d) is int and d >= 0 for d in shape):
            if not isinstance(shape, (tuple, list, torch.Size)) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
                raise TypeError(f"MXFP4Tensor.shape must be a tuple of non-negative ints, got {shape!r}")
            object.__setattr__(self, "shape", tuple(int(s) for s in shape))
        for name, t in (("data", self.data), ("scales", self.scales)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"MXFP4Tensor.{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype is not torch.uint8:
                raise TypeError(f"MXFP4Tensor.{name} must be uint8, got {t.dtype}")
        if not isinstance(self.layout, Layout):
            raise TypeError(f"MXFP4Tensor.layout must be a Layout, got {self.layout!r}")
        if not isinstance(self.scale_rule, ScaleRule):
            raise TypeError(f"MXFP4Tensor.scale_rule must be a ScaleRule, got {self.scale_rule!r}")
        if self.data.device != self.scales.device:
            raise ValueError(
                f"MXFP4Tensor.data ({self.data.device}) and .scales ({self.scales.device}) must be on one device"
            )
        if len(self.shape) < 1 or self.shape[-1] % BLOCK or self.shape[-1] == 0:
            raise ValueError(f"MXFP4Tensor.shape {self.shape} must end in K > 0 with K % {BLOCK} == 0")
        *lead, k = self.shape
        if self.layout is Layout.PLAIN:
            want_data, want_scales = (*lead, k // 2), (*lead, k // BLOCK)
        else:
            if len(self.shape) != 2:
                raise ValueError(f"an AITER_SHUFFLED MXFP4Tensor must be 2-D [N, K], got shape {self.shape}")
            want_data, want_scales = _stored_shapes(self.shape, self.layout)
        if self.data.shape != want_data:
            raise ValueError(f"MXFP4Tensor.data must have shape {want_data} for {self.layout.name} "
                             f"shape {self.shape}, got {tuple(self.data.shape)}")
        if self.scales.shape != want_scales:
            raise ValueError(f"MXFP4Tensor.scales must have shape {tuple(want_scales)} for {self.layout.name} "
                             f"shape {self.shape}, got {tuple(self.scales.shape)} (too small or too large)")

    @property
    def device(self) -> torch.device:
        return self.data.device

    def to_layout(self, layout: Layout) -> "MXFP4Tensor":
        """The same values in another layout (a copy unless the layout is already ``layout``)."""
        if not isinstance(layout, Layout):
            raise TypeError(f"layout must be a mxfp4.Layout, got {layout!r}")
        if layout is self.layout:
            return self
        if len(self.shape) != 2:  # only a PLAIN tensor can have another rank
            raise ValueError(f"to_layout({layout.name}): the shuffled layout is a 2-D weight's [N, K], this tensor "
                             f"has shape {self.shape} (one MXFP4Tensor per matrix; experts: mxfp4.ExpertWeights.stack)")
        n, k = self.shape
        n16, k64 = padded_shape(n, k)
        if layout is Layout.AITER_SHUFFLED:
            data, scales = self.data, self.scales
            if (n16, k64) != (n, k):  # zero codes at scale 1 (byte 127): blocks of zeros
                data = torch.nn.functional.pad(data, (0, (k64 - k) // 2, 0, n16 - n))
                scales = torch.nn.functional.pad(scales, (0, (k64 - k) // BLOCK, 0, n16 - n),
                                                 value=layouts.SCALE_PAD_VALUE)
            return MXFP4Tensor(layouts.shuffle_weight(data), layouts.shuffle_scales(scales),
                               self.shape, Layout.AITER_SHUFFLED, self.scale_rule)
        data = layouts.unshuffle_weight(self.data)
        scales = layouts.unshuffle_scales(self.scales, n16, k64 // BLOCK)
        if (n16, k64) != (n, k):
            data, scales = data[:n, :k // 2].contiguous(), scales[:n, :k // BLOCK].contiguous()
        return MXFP4Tensor(data, scales, self.shape, Layout.PLAIN, self.scale_rule)


@functools.lru_cache(maxsize=256)
def _stored_shapes(shape: tuple[int, int], layout: Layout) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The data and scales shapes a 2-D ``shape`` (ints) has in ``layout``; None when it breaks a rule."""
    n, k = shape
    if n < 0 or k <= 0 or k % BLOCK:
        return None
    if layout is Layout.PLAIN:
        return (n, k // 2), (n, k // BLOCK)
    n16, k64 = padded_shape(n, k)
    return (n16, k64 // 2), layouts.shuffled_scale_shape(n16, k64 // BLOCK)


LAYER_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
"""The dtypes of an MXFP4 layer's output and bias (the inputs it takes too)."""


def applied_dtype(fn, dtype: torch.dtype, owner: str, allowed: tuple[torch.dtype, ...] = LAYER_DTYPES) -> torch.dtype:
    """The dtype of a module holding MXFP4 bytes after ``nn.Module._apply(fn)`` (``.to(dtype)``, ``.half()``,
    ``.double()``, ``.type(dtype)``): what ``fn`` makes of a float tensor of ``dtype``. TypeError naming
    ``owner`` and the rule, before anything changes, when that is not one of ``allowed``, or when ``fn``
    would convert the uint8 bytes too."""
    new = fn(torch.empty(0, dtype=dtype)).dtype
    if new not in allowed:
        names = ", ".join(str(d) for d in allowed)
        raise TypeError(f"{owner}'s dtype (its output's and bias's) must be one of {names}; .to() / .half() / "
                        f".double() asked for {new}")
    if fn(torch.empty(0, dtype=torch.uint8)).dtype is not torch.uint8:
        raise TypeError(f"{owner} keeps its MXFP4 codes and scales as uint8 bytes; .type({new}) would convert them: "
                        f"use .to({new})")
    return new


def padded_shape(n: int, k: int) -> tuple[int, int]:
    """(N16, K64): a weight's rows and columns in the kernels' layout, N rounded up to 16 and K to 64."""
    return -(-n // 16) * 16, -(-k // 64) * 64


def quantize(x: torch.Tensor, scale_rule: ScaleRule = ScaleRule.AITER) -> MXFP4Tensor:
    """Quantize a bf16 / fp16 / fp32 tensor [..., K] (K % 32 == 0) to MXFP4, plain layout.

    Bit-exact with the task's quantizer under ``ScaleRule.AITER``; see :mod:`mxfp4.formats` for
    the rounding and the special values. bf16 on a Hopper GPU runs the CUDA kernel (the device
    function the GEMM quantizes A with); everything else the PyTorch implementation.
    """
    formats._check_float_input(x, "x")
    if not isinstance(scale_rule, ScaleRule):
        raise TypeError(f"scale_rule must be a ScaleRule, got {scale_rule!r}")
    if (x.dtype == torch.bfloat16 and scale_rule is ScaleRule.AITER and x.shape[-1] % 64 == 0
            and cuda_supported(x.device)):
        from .cuda import ops as cuda_ops

        data, scales = cuda_ops.quantize(x.reshape(-1, x.shape[-1]))
        return MXFP4Tensor(data.reshape(*x.shape[:-1], -1), scales.reshape(*x.shape[:-1], -1), tuple(x.shape),
                           Layout.PLAIN, scale_rule)
    codes, scales = formats.quantize_codes(x, scale_rule)
    return MXFP4Tensor(formats.pack_codes(codes), scales, tuple(x.shape), Layout.PLAIN, scale_rule)


def dequantize(t: MXFP4Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Values of an MXFP4 tensor as float32 (or float64) [..., K]: code value times block scale."""
    if not isinstance(t, MXFP4Tensor):
        raise TypeError(f"t must be an MXFP4Tensor, got {type(t).__name__}")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    t = t.to_layout(Layout.PLAIN)
    values = formats.e2m1_to_float(formats.unpack_codes(t.data), dtype)
    scale = formats.e8m0_to_float(t.scales, dtype).repeat_interleave(BLOCK, dim=-1)
    return values * scale


def prepare(w: MXFP4Tensor) -> MXFP4Tensor:
    """The weight in the form the CUDA kernels read (aiter's shuffled layouts): do it once, at load time.

    Any [N, K] (K % 32 == 0): the kernels' layout needs N % 16 == 0 and K % 64 == 0, so other
    shapes are padded with zero blocks (:class:`Layout`); the logical shape stays (N, K) and
    :func:`mxfp4.gemm_a4w4` returns N columns. A weight already in that form is returned as it is;
    the result holds the MXFP4 bytes (N16*K64/2 codes and the scale bytes, padded to aiter's
    256 x 8 tiles).
    """
    if not isinstance(w, MXFP4Tensor):
        raise TypeError(f"w must be an MXFP4Tensor, got {type(w).__name__}")
    if len(w.shape) != 2:
        raise ValueError(f"w must be a 2-D weight [N, K], got shape {w.shape}")
    return w.to_layout(Layout.AITER_SHUFFLED)
