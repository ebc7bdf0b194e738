"""mxfp4.quantize against an independent brute-force oracle, every tie, and the old task reference.

The oracle below does not call mxfp4.formats: it finds the scale exponent from the float32 bits of
the block amax with numpy, divides exactly in float64, and picks the nearest e2m1 magnitude by
distance (ties to the even code). Special values (zeros, NaN, saturation, ...) are in
test_formats_special.py.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import mxfp4
from mxfp4 import ScaleRule

MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
TIE_CODES = (0, 2, 2, 4, 4, 6, 6)       # the even neighbour of each tie, written out by hand
BELOW_TIE_CODES = (0, 1, 2, 3, 4, 5, 6)  # one ulp below a tie: the lower neighbour
ABOVE_TIE_CODES = (1, 2, 3, 4, 5, 6, 7)  # one ulp above: the upper neighbour


# ---- the oracle -------------------------------------------------------------------------------

def oracle_exponent(amax: np.ndarray, rule: ScaleRule) -> np.ndarray:
    """Scale exponent of finite float32 amax values, by the ScaleRule docstring."""
    amax = amax.astype(np.float32)
    if rule is ScaleRule.AITER:
        bits = amax.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x200000) & 0xFF800000).astype(np.uint32).view(np.float32).astype(np.float64)
    else:
        rounded = amax.astype(np.float64)
    _, exp = np.frexp(rounded)  # rounded = m * 2**exp, m in [0.5, 1): floor(log2) = exp - 1
    e = (exp.astype(np.int64) - 1) - 2
    e = np.where(rounded == 0, -127, e)
    e = np.where(np.isinf(rounded), 127, e)  # aiter: amax >= 1.75 * 2**127 rounds to float32 Inf
    return np.clip(e, -127, 127)


def oracle_quantize(x: torch.Tensor, rule: ScaleRule = ScaleRule.AITER) -> tuple[np.ndarray, np.ndarray]:
    """(packed bytes [..., K/2], scale bytes [..., K/32]) of x, computed element by element in float64."""
    v = x.to(torch.float32).numpy()
    blocks = v.reshape(*v.shape[:-1], v.shape[-1] // 32, 32)
    amax = np.abs(blocks).max(axis=-1)
    finite = np.isfinite(amax)
    e = oracle_exponent(np.where(finite, amax, 0), rule)
    with np.errstate(invalid="ignore"):
        scaled = np.abs(blocks.astype(np.float64)) / np.ldexp(1.0, e)[..., None]
        dist = np.abs(scaled[..., None] - MAGNITUDES)
    nearest = dist == dist.min(axis=-1, keepdims=True)
    odd = np.arange(8) % 2
    codes = np.argmin(np.where(nearest, odd, 2), axis=-1)  # among nearest: the even code first
    codes = codes | (np.signbit(blocks).astype(np.int64) << 3)
    codes = np.where(finite[..., None], codes, 0).reshape(v.shape).astype(np.uint8)
    scales = np.where(finite, e + 127, 255).astype(np.uint8)
    return codes[..., 0::2] | (codes[..., 1::2] << 4), scales


def assert_matches_oracle(x: torch.Tensor, rule: ScaleRule = ScaleRule.AITER) -> None:
    q = mxfp4.quantize(x, rule)
    want_data, want_scales = oracle_quantize(x, rule)
    np.testing.assert_array_equal(q.scales.numpy(), want_scales)
    np.testing.assert_array_equal(q.data.numpy(), want_data)


# ---- random data ------------------------------------------------------------------------------

def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def wide_exponents(rows: int, k: int, lo: int, hi: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """randn values times 2**(block exponent in [lo, hi] + element offset in [-12, 0])."""
    g = _gen(seed)
    base = torch.randint(lo, hi + 1, (rows, k // 32, 1), generator=g)
    offset = torch.randint(-12, 1, (rows, k // 32, 32), generator=g)
    x = torch.randn(rows, k // 32, 32, dtype=torch.float64, generator=g) * torch.pow(2.0, (base + offset).double())
    return x.reshape(rows, k).to(dtype)


def amax_patterns(rows: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Blocks whose amax mantissa sits at, just below, or away from the 1.75 rounding point."""
    g = _gen(seed)
    mantissas = torch.tensor([1.0, 1.5, 1.7421875, 1.75, 1.9921875, 1.2421875], dtype=torch.float64)
    pick = mantissas[torch.randint(0, len(mantissas), (rows,), generator=g)]
    amax = pick * torch.pow(2.0, torch.randint(-130, 128, (rows,), generator=g).double())
    x = (torch.rand(rows, 32, dtype=torch.float64, generator=g) * 2 - 1) * amax[:, None]
    where = torch.randint(0, 32, (rows,), generator=g)
    sign = torch.where(torch.rand(rows, generator=g) < 0.5, -1.0, 1.0).double()
    x[torch.arange(rows), where] = sign * amax
    return x.to(dtype)


RANDOM_CASES = {
    "randn_bf16": lambda: torch.randn(128, 512, generator=_gen(1)).to(torch.bfloat16),
    "wide_bf16": lambda: wide_exponents(64, 512, -140, 120, torch.bfloat16, 2),
    "wide_fp16": lambda: wide_exponents(64, 256, -20, 13, torch.float16, 3),
    "wide_fp32": lambda: wide_exponents(64, 512, -149, 124, torch.float32, 4),
    "amax_bf16": lambda: amax_patterns(512, torch.bfloat16, 5).reshape(256, 64),
    "amax_fp32": lambda: amax_patterns(512, torch.float32, 6).reshape(128, 128),
}


@pytest.mark.parametrize("case", sorted(RANDOM_CASES))
def test_quantize_matches_oracle_on_random_data(case):
    """Data bytes and scale bytes equal the oracle bit for bit (~180k values over all cases)."""
    x = RANDOM_CASES[case]()
    assert x.numel() >= 16384
    assert_matches_oracle(x)


@pytest.mark.parametrize("case", ["wide_bf16", "wide_fp32", "amax_fp32"])
def test_floor_rule_matches_oracle_on_random_data(case):
    """ScaleRule.FLOOR (OCP: floor(log2 amax) - 2) against the same oracle."""
    assert_matches_oracle(RANDOM_CASES[case](), ScaleRule.FLOOR)


def test_random_cases_cover_at_least_100k_values():
    assert sum(make().numel() for make in RANDOM_CASES.values()) >= 100_000


# ---- every tie --------------------------------------------------------------------------------

def _step(x: torch.Tensor, ulps: int) -> torch.Tensor:
    """Move positive finite values by `ulps` units in their own dtype (bit pattern +- 1)."""
    int_type = {torch.bfloat16: torch.int16, torch.float32: torch.int32}[x.dtype]
    return (x.view(int_type) + ulps).view(x.dtype)


def _tie_blocks(e: int, dtype: torch.dtype) -> torch.Tensor:
    """Three blocks, each led by 4 * 2**e (fixes the exponent at e): ties +-, one ulp below, one above."""
    scale = 2.0 ** e
    ties = torch.tensor(TIES, dtype=torch.float64).mul(scale).to(dtype)
    lead = torch.tensor([4.0 * scale], dtype=torch.float64).to(dtype)
    zeros = torch.zeros(17, dtype=dtype)
    return torch.stack([
        torch.cat([lead, ties, -ties, zeros]),
        torch.cat([lead, _step(ties, -1), _step(ties, -1), zeros]),
        torch.cat([lead, _step(ties, +1), _step(ties, +1), zeros]),
    ])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("e", [-127, -126, -125, -124, -123, -122, -121, -120, -64, -1, 0, 1, 64, 120, 125])
def test_every_tie_rounds_to_even(e, dtype):
    """t * 2**e for each midpoint t goes to the even code; one ulp either side goes the other way."""
    x = _tie_blocks(e, dtype)
    assert torch.equal(x.double()[0, 1:8], torch.tensor(TIES, dtype=torch.float64) * 2.0 ** e)  # exact ties
    q = mxfp4.quantize(x)
    codes = mxfp4.formats.unpack_codes(q.data)
    rest = [0] * 17
    neg = [c | 8 for c in TIE_CODES]
    assert codes[0].tolist() == [6, *TIE_CODES, *neg, *rest]
    assert codes[1].tolist() == [6, *BELOW_TIE_CODES, *BELOW_TIE_CODES, *rest]
    assert codes[2].tolist() == [6, *ABOVE_TIE_CODES, *ABOVE_TIE_CODES, *rest]
    assert q.scales.tolist() == [[e + 127]] * 3
    assert_matches_oracle(x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_ties_at_the_top_exponent(dtype):
    """amax = 1.75 * 2**127 gives e = 127 (aiter rounds amax to Inf); the representable ties still round to even."""
    x = torch.zeros(1, 32, dtype=torch.float64)
    x[0, :4] = torch.tensor([0.25, 0.75, 1.25, 1.75]) * 2.0 ** 127
    x = x.to(dtype)
    q = mxfp4.quantize(x)
    assert q.scales.tolist() == [[254]]
    assert mxfp4.formats.unpack_codes(q.data)[0, :4].tolist() == [0, 2, 2, 4]


# ---- the old task reference (ties up) ---------------------------------------------------------

def _is_tie(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    e = scales.to(torch.float64).sub(127).repeat_interleave(32, dim=-1)
    scaled = x.to(torch.float64).abs() / torch.pow(2.0, e)
    return torch.isin(scaled, torch.tensor(TIES, dtype=torch.float64))


def test_matches_old_reference_except_ties(old_ref):
    """Same scales everywhere and same codes off ties; at ties we take the even code, the old one the upper."""
    x = torch.randn(256, 1024, generator=_gen(7)).to(torch.bfloat16)
    x[0, :32] = torch.tensor([4.0, 1.25] + [0.0] * 30)  # a tie (1.25 -> 1.0 even, 1.5 up) for certain
    assert not (torch.signbit(x) & (x == 0)).any()  # -0.0 is signed differently by the old reference
    ours = mxfp4.quantize(x)
    old_data, old_scales = old_ref.quantize_mxfp4(x)
    assert torch.equal(ours.scales, old_scales)

    ours_codes = mxfp4.formats.unpack_codes(ours.data)
    old_codes = mxfp4.formats.unpack_codes(old_data)
    tie = _is_tie(x, ours.scales)
    assert torch.equal(ours_codes[~tie], old_codes[~tie])

    differ = tie & (ours_codes != old_codes)
    assert differ[0, 1] and differ.sum() > 1
    # the one documented difference: the old rule takes the next magnitude up, ours the even one
    assert torch.equal(old_codes[differ], ours_codes[differ] + 1)
    assert (ours_codes[differ] % 2 == 0).all()
