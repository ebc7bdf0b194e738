"""MXFP4 element and scale formats: e2m1 codes, e8m0 scales, scale rules, packing.

Semantics (the task's, i.e. aiter's ``dynamic_mxfp4_quant`` with round-to-nearest-even):

* A block is 32 consecutive elements along the last axis. Its scale is ``2**e`` stored as the
  e8m0 byte ``e + 127``; ``e`` comes from the block's ``amax`` by a :class:`ScaleRule`.
* Each element becomes the e2m1 code nearest to ``x / 2**e`` (magnitudes 0, 0.5, 1, 1.5, 2, 3,
  4, 6), ties to the even code, saturating at 6. The sign bit of ``x`` is kept, so ``-0.0`` and
  negative values that round to zero give code 8 (``-0``).
* Two codes per byte: element ``2i`` in the low nibble, ``2i + 1`` in the high nibble.

Special values (the same in every implementation: this module, the Triton kernels, the tests):

* all-zero block: ``e = -127`` (byte 0), codes 0 (or 8 for ``-0.0``).
* subnormal inputs are exact inputs like any other: the scale rule sees their true value.
* a block holding NaN or +-Inf: scale byte 255 (e8m0 NaN) and every code 0, so the whole block
  dequantizes to NaN and the GEMM rows it feeds become NaN.
* dequantize: byte ``b`` in 0..254 is ``2**(b - 127)`` (byte 0 is the float32 subnormal
  ``2**-127``), byte 255 is NaN.
"""
from __future__ import annotations

import enum

import torch

BLOCK = 32
"""Elements per MX block along K."""

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
"""Value of each 4-bit code; bit 3 is the sign."""

E8M0_NAN = 255

# Midpoints between neighbouring e2m1 magnitudes, and whether a value equal to the midpoint
# rounds up (the upper neighbour has the even code) or stays down.
MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))

_ABS_MASK = 0x7FFFFFFF
_INF_BITS = 0x7F800000


class ScaleRule(enum.Enum):
    """How a block's scale exponent ``e`` follows from ``amax = max |x|`` over the block.

    AITER: ``e = floor(log2(r)) - 2`` with ``r`` = amax's float32 bits plus ``0x200000``, mantissa
        cleared (amax rounded up to a power of two when its mantissa is >= 1.75); all-zero blocks
        (and amax below ``0.75 * 2**-126``, where r is 0) give ``-127``; clamped to [-127, 127].
        This is the task's rule and the default.
    FLOOR: ``e = floor(log2(amax)) - 2``, clamped to [-127, 127] (the OCP MX v1.0 rule); zero
        blocks give -127.
    """

    AITER = "aiter"
    FLOOR = "floor"


def _check_float_input(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"{name} must be bfloat16, float16 or float32, got {x.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{name} must have at least one dimension [..., K], got a scalar")
    if x.shape[-1] % BLOCK != 0 or x.shape[-1] == 0:
        raise ValueError(f"{name}.shape[-1] (K = {x.shape[-1]}) must be a positive multiple of {BLOCK}")


def scale_exponent(amax_bits: torch.Tensor, rule: ScaleRule) -> torch.Tensor:
    """Unbiased scale exponent (int32) from the float32 bits of a finite, non-negative amax."""
    if rule is ScaleRule.AITER:
        biased = (amax_bits + 0x200000) >> 23
        # biased 255 means amax rounded up to 2**128 (float32 Inf): log2 is +inf, clamped to 127.
        return torch.where(biased == 255, torch.full_like(biased, 127), (biased - 129).clamp(-127, 127))
    if rule is ScaleRule.FLOOR:
        return ((amax_bits >> 23) - 129).clamp(-127, 127)
    raise TypeError(f"scale_rule must be a ScaleRule, got {rule!r}")


def pow2(exponent: torch.Tensor) -> torch.Tensor:
    """``2**exponent`` as float64 for integers in [-1022, 1023], built from its bits: exact on every
    device (``torch.pow`` on a GPU is not guaranteed exact, even for powers of two)."""
    e = exponent.to(torch.int64).clamp(-1022, 1023)
    return ((e + 1023) << 52).view(torch.float64)


def midpoint_bits(exponent: torch.Tensor) -> list[tuple[torch.Tensor, bool]]:
    """Float32 bit patterns of each midpoint times ``2**exponent`` (exact, subnormals included)."""
    scale = pow2(exponent)
    return [((m * scale).to(torch.float32).view(torch.int32), up) for m, up in MIDPOINTS]


def quantize_codes(x: torch.Tensor, rule: ScaleRule = ScaleRule.AITER) -> tuple[torch.Tensor, torch.Tensor]:
    """Unpacked e2m1 codes (uint8 [..., K]) and e8m0 scale bytes (uint8 [..., K/32])."""
    bits = x.to(torch.float32).contiguous().view(torch.int32)
    blocks = bits.reshape(*bits.shape[:-1], bits.shape[-1] // BLOCK, BLOCK)
    mag = blocks & _ABS_MASK  # integer order equals float order for non-negative floats
    amax = mag.amax(dim=-1)
    nonfinite = amax >= _INF_BITS
    exponent = scale_exponent(torch.where(nonfinite, torch.zeros_like(amax), amax), rule)

    codes = torch.zeros_like(mag)
    for thr, up in midpoint_bits(exponent):
        thr = thr.unsqueeze(-1)
        codes += (mag >= thr if up else mag > thr).to(torch.int32)
    codes |= (blocks < 0).to(torch.int32) << 3
    codes = torch.where(nonfinite.unsqueeze(-1), torch.zeros_like(codes), codes)

    scales = torch.where(nonfinite, torch.full_like(exponent, E8M0_NAN), exponent + 127)
    return codes.reshape(x.shape).to(torch.uint8), scales.to(torch.uint8)


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """Pack uint8 codes [..., K] (K even) to bytes [..., K/2], element 2i in the low nibble."""
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_codes`: bytes [..., K/2] to codes [..., K]."""
    lo = packed & 0xF
    hi = packed >> 4
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def e2m1_to_float(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Values of 4-bit codes."""
    table = torch.tensor(E2M1_VALUES, dtype=dtype, device=codes.device)
    return table[codes.long()]


def e8m0_to_float(scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Values of e8m0 bytes: ``2**(b - 127)``, NaN for 255."""
    value = pow2(scales.to(torch.int64) - 127)
    value = torch.where(scales == E8M0_NAN, torch.full_like(value, float("nan")), value)
    return value.to(dtype)
