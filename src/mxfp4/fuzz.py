"""Seeded differential fuzzing of every entry point against an independent exact oracle.

``mxfp4 fuzz --cases N --seed S [--backend auto|cuda|reference]``: case ``i`` of seed ``S`` is
drawn from ``random.Random(f"{S}:{i}")`` alone, so ``mxfp4 fuzz --seed S --case i`` replays it.
A case picks an entry point (``gemm_a4w4`` with or without ``out=`` / forced kernel variant,
``MXFP4Linear``, ``torch.ops.mxfp4.gemm_a4w4``, ``task.custom_kernel``, ``quantize``), a layout,
an activation dtype, a scale rule, odd shapes, and values block by block over the whole input range
(subnormals to the largest finite, exact e2m1 midpoints, scale-rounding boundaries, zeros, NaN/Inf,
saturation, and blocks that cancel far above the result).

The oracle shares nothing with ``reference.py`` or ``formats.py`` (but ``unpack_codes``, to read
packed bytes): it quantizes with frexp and a nearest-value search, sums each block's doubled codes
as exact integers, adds the block terms ``s * 2**(ea + ew - 2)`` in int64 limbs of 24 bits (exact
over the whole e8m0 range) and rounds once to bf16. The contract checked (README, docs/design.md):

* quantize / dequantize: bit-exact.
* reference backend: bit-exact, NaN exactly where a block of the row or column has the NaN scale.
* CUDA kernel: within ``ulp_bf16(exact) + 2**-20 * sum|a w|``, NaN/Inf exactly where the exact
  product rounded to bf16 has them, for outputs whose blocks all have ``-147 <= ea + ew <= 114``
  (the kernel's stated domain, docs/design.md). Deviations outside that domain are counted
  and listed, not failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import sys
import time

import torch

from . import formats  # unpack_codes only: reading the library's packed bytes

BLOCK = 32
_MAGS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)  # values and midpoints
_DTYPES = {  # exponent of the smallest subnormal, of the largest binade, significand bits
    "bf16": (torch.bfloat16, -133, 127, 8), "fp16": (torch.float16, -24, 15, 11),
    "fp32": (torch.float32, -149, 127, 24),
}
_M = (1, 1, 2, 3, 4, 7, 8, 8, 15, 16, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 333)
_N_SHUFFLED = (16, 16, 32, 48, 64, 64, 80, 96, 128, 160, 256)
_N_PLAIN = (1, 8, 16, 24, 40, 48, 64, 100)
_K64 = (64, 64, 128, 128, 192, 256, 320, 512, 768, 1024)
_K32 = (32, 96, 160, 224, 64, 128, 288)
_MAX_MNK = 1 << 22  # keeps a case to a few milliseconds of oracle time


# ---- the oracle -----------------------------------------------------------------------------------

def oracle_quantize(x: torch.Tensor, floor_rule: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes uint8 [..., K], scale bytes uint8 [..., K/32]) of x, by frexp and nearest-value search."""
    x64 = x.to(torch.float64)
    blocks = x64.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)
    nonfinite = ~torch.isfinite(blocks).all(-1)
    amax = torch.where(torch.isfinite(blocks), blocks.abs(), torch.zeros_like(blocks)).amax(-1)
    mant, ex = torch.frexp(amax)  # amax = mant * 2**ex, mant in [0.5, 1)
    floor = ex.to(torch.int64) - 1
    if floor_rule:
        e = floor - 2
    else:  # aiter: amax rounded up to the next power of two when its significand is >= 1.75
        rounded = floor + (mant >= 0.875).to(torch.int64)
        e = torch.where(rounded >= 128, torch.full_like(rounded, 129), rounded) - 2  # 2**128 is Inf: log2 -> clamp
    e = torch.where(amax == 0, torch.full_like(e, -127), e).clamp(-127, 127)
    q = blocks.abs() / torch.pow(2.0, e.to(torch.float64)).unsqueeze(-1)
    dist = (q.unsqueeze(-1) - torch.tensor(_MAGS, dtype=torch.float64)).abs()
    best = dist == dist.amin(-1, keepdim=True)
    even = best & (torch.arange(8) % 2 == 0)
    idx = torch.where(even.any(-1), even.to(torch.int8).argmax(-1), best.to(torch.int8).argmax(-1))
    codes = idx | (torch.signbit(blocks).to(torch.int64) << 3)
    codes = torch.where(nonfinite.unsqueeze(-1), torch.zeros_like(codes), codes)
    scales = torch.where(nonfinite, torch.full_like(e, 255), e + 127)
    return codes.reshape(x.shape).to(torch.uint8), scales.to(torch.uint8)


def _doubled(codes: torch.Tensor) -> torch.Tensor:
    """Twice the e2m1 value of each code (an integer, float64)."""
    mags = torch.tensor(_MAGS, dtype=torch.float64)[(codes & 7).long()] * 2
    return torch.where(codes >= 8, -mags, mags)


def oracle_values(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float64 values of unpacked codes [..., K] with scale bytes [..., K/32] (255: NaN)."""
    e = scales.to(torch.float64) - 127
    s = torch.where(scales == 255, torch.full_like(e, float("nan")), torch.pow(2.0, e - 1))
    return _doubled(codes) * s.repeat_interleave(BLOCK, -1)


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    """Nearest bf16 (ties to even) of float64 values, by rounding x / quantum to an integer."""
    _, ex = torch.frexp(x.abs())
    quantum = torch.pow(2.0, ((ex.to(torch.int64) - 1).clamp(min=-126) - 7).to(torch.float64))
    r = torch.round(x / quantum) * quantum  # torch.round: half to even
    r = torch.where(r.abs() >= 2.0 ** 128, torch.copysign(torch.full_like(r, float("inf")), x), r)
    return r.to(torch.bfloat16)


@dataclasses.dataclass
class Exact:
    """Per output element: the exact value (float64, exact to 25 bits and a sticky bit), its
    bf16 rounding, sum |a w|, and whether the block scale products lie in the kernel's domain."""

    value: torch.Tensor
    bf16: torch.Tensor
    magnitude: torch.Tensor
    in_domain: torch.Tensor


def oracle_gemm(a_codes, a_scales, w_codes, w_scales) -> Exact:
    """The exact product of quantized A [M, K] and W [N, K] (unpacked codes, scale bytes)."""
    m, k = a_codes.shape
    n, nb = w_codes.shape[0], k // BLOCK
    av = _doubled(a_codes).reshape(m, nb, BLOCK)
    wv = _doubled(w_codes).reshape(n, nb, BLOCK)
    s = torch.einsum("mbk,nbk->mnb", av, wv)  # exact integers, |s| <= 4608
    sabs = torch.einsum("mbk,nbk->mnb", av.abs(), wv.abs())
    ea, ew = a_scales.long() - 127, w_scales.long() - 127
    nan = (a_scales == 255).any(-1)[:, None] | (w_scales == 255).any(-1)[None, :]
    ea, ew = torch.where(a_scales == 255, 0, ea), torch.where(w_scales == 255, 0, ew)
    esum = ea[:, None, :] + ew[None, :, :]  # [M, N, nb]: the block's term is s * 2**(esum - 2)
    in_domain = ((esum >= -147) & (esum <= 114)).all(-1) | nan
    e = esum - 2

    # exact sum in 24-bit limbs: the term's offset e + 256 in [0, 508] picks limb and shift
    off = e + 256
    limbs = torch.zeros(m * n, 23, dtype=torch.int64)
    vals = s.to(torch.int64) << (off % 24)
    limbs.scatter_add_(1, (off // 24).reshape(m * n, nb), vals.reshape(m * n, nb))

    def normalize(x):
        for i in range(22):
            c = x[:, i] >> 24
            x[:, i] -= c << 24
            x[:, i + 1] += c
        return x

    limbs = normalize(limbs)
    neg = limbs[:, 22] < 0
    limbs = torch.where(neg[:, None], normalize(-limbs), limbs)
    nz = limbs != 0
    h = (nz * torch.arange(23)).amax(-1)
    pad = torch.cat([torch.zeros(m * n, 1, dtype=torch.int64), limbs], 1)  # pad[:, j + 1] = limb j
    top, nxt = pad.gather(1, (h + 1)[:, None])[:, 0], pad.gather(1, h[:, None])[:, 0]
    below = torch.cat([torch.zeros(m * n, 2, dtype=torch.int64), nz.long().cumsum(1)], 1)  # below[:, j+2]: nz in 0..j
    sticky = below.gather(1, h[:, None])[:, 0] > 0  # any limb under h - 1
    v = ((top * 2 ** 24 + nxt) * 2 + sticky.long()).to(torch.float64)
    value = torch.ldexp(v, (24 * (h - 1) - 257).to(torch.float64))
    value = torch.where(neg, -value, value).reshape(m, n)
    value = torch.where(nan, torch.full_like(value, float("nan")), value)

    mag = (sabs * torch.pow(2.0, e.to(torch.float64))).sum(-1)
    return Exact(value, round_bf16(value), mag, in_domain)


def ulp_bf16(x: torch.Tensor) -> torch.Tensor:
    _, ex = torch.frexp(x.abs())
    return torch.pow(2.0, ((ex.to(torch.int64) - 1).clamp(min=-126) - 7).to(torch.float64))


# ---- the cases ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    index: int
    entry: str      # gemm | gemm_out | gemm_params | linear | from_linear | op | task | quantize
    shuffled: bool
    dtype: str      # bf16 | fp16 | fp32 (of A; of the float weight for quantize / from_linear)
    floor_rule: bool
    lead: tuple     # A's leading dims (M = their product)
    n: int
    k: int
    profile: str    # randn | wide | mixed | cancel
    strided: bool   # A a column slice of a wider tensor

    def describe(self) -> str:
        return (f"entry={self.entry} {'AITER_SHUFFLED' if self.shuffled else 'PLAIN'} {self.dtype} "
                f"{'FLOOR' if self.floor_rule else 'AITER'} A{list(self.lead) + [self.k]} N={self.n} "
                f"profile={self.profile}{' strided' if self.strided else ''}")


def draw_case(seed: int, index: int) -> Case:
    r = random.Random(f"{seed}:{index}")
    entry = r.choices(("gemm", "gemm_out", "gemm_params", "linear", "from_linear", "op", "task", "quantize"),
                      (25, 10, 10, 8, 7, 12, 10, 18))[0]
    shuffled = r.random() < 0.8 or entry in ("task", "gemm_params")
    dtype = r.choices(("bf16", "fp16", "fp32"), (80, 10, 10))[0]
    floor_rule = r.random() < 0.05 and entry not in ("task", "gemm_params")
    if entry in ("task", "gemm_params"):
        dtype = "bf16"
    profile = r.choices(("randn", "wide", "mixed", "cancel"), (30, 25, 35, 10))[0]
    n = r.choice(_N_SHUFFLED if shuffled else _N_PLAIN)
    k = r.choice(_K64 if shuffled or r.random() < 0.5 else _K32)
    m = r.choice(_M)
    if r.random() < 0.01 and entry in ("gemm", "op"):
        m = 0
    if profile == "cancel":
        m, n, k = min(m, 17), min(n, 64), max(k, 128)
    while m * n * k > _MAX_MNK:
        m = max(1, m // 2)
    lead = (m,)
    if entry not in ("task", "gemm_params") and m % 2 == 0 and m and r.random() < 0.15:
        lead = (2, m // 2)
    strided = entry != "quantize" and r.random() < 0.15
    return Case(seed, index, entry, shuffled, dtype, floor_rule, lead, n, k, profile, strided)


def _blocks(g: torch.Generator, rows: int, nb: int, dtype: str, profile: str, narrow: bool,
            specials: int = 0) -> torch.Tensor:
    """float64 [rows, nb, 32] values, block by block, representable in ``dtype`` once cast; in the
    'mixed' profile a block is, per mille: 200 e2m1 grid and midpoints, 100 zeros (signed), 80
    subnormals, 50 near the largest finite, 100 amax on the scale-rounding edge, ``specials``
    NaN/Inf, the rest randn times 2**e."""
    _, emin, emax, bits = _DTYPES[dtype]
    shape = (rows, nb, BLOCK)
    lo, hi = (-8, 8) if narrow else (emin + 2, emax - 3)
    e = torch.randint(lo, hi + 1, (rows, nb, 1), generator=g).to(torch.float64)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * torch.pow(2.0, e)
    if profile in ("randn", "wide", "cancel"):
        return x
    pct = torch.randint(0, 1000, (rows, nb, 1), generator=g)
    sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0).to(torch.float64)
    # exact e2m1 values and midpoints times 2**e, with one element +-6 or +-4 fixing the scale at e
    grid = torch.tensor(_GRID, dtype=torch.float64)[torch.randint(0, len(_GRID), shape, generator=g)]
    mid = sign * grid
    mid[..., 0] = sign[..., 0] * torch.where(torch.rand(rows, nb, generator=g) < 0.5, 6.0, 4.0).to(torch.float64)
    mid = mid[..., torch.randperm(BLOCK, generator=g)] * torch.pow(2.0, e)
    zero = sign * 0.0
    sub = sign * torch.randint(0, 1 << (bits - 1), shape, generator=g).to(torch.float64) * 2.0 ** emin
    top = (2.0 - 2.0 ** (1 - bits)) * 2.0 ** emax
    sat = sign * top * (1 - torch.randint(0, 8, shape, generator=g).to(torch.float64) * 2.0 ** -bits)
    # amax on the scale rule's rounding boundary (significand 1.75 and its neighbours)
    fb = torch.randint(max(emin + bits, -126), emax, (rows, nb, 1), generator=g).to(torch.float64)
    step = torch.randint(-1, 2, (rows, nb, 1), generator=g).to(torch.float64) * 2.0 ** (1 - bits)
    edge = x / x.abs().amax(-1, keepdim=True).clamp(min=1e-300) * 2.0 ** fb
    edge[..., :1] = sign[..., :1] * (1.75 + step) * 2.0 ** fb
    special = x.clone()
    pick = torch.randint(0, 3, (rows, nb), generator=g)
    special[..., 3] = torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=torch.float64)[pick]
    out, start = x, 0
    for per_mille, v in ((200, mid), (100, zero), (80, sub), (50, sat), (100, edge), (specials, special)):
        out = torch.where((pct >= start) & (pct < start + per_mille), v, out)
        start += per_mille
    return out


def make_operands(case: Case, g: torch.Generator):
    """(A [*lead, K] in the case's dtype, float weight B [N, K] in bf16 or the case's dtype)."""
    m, nb = int(torch.Size(case.lead).numel()), case.k // BLOCK
    narrow = case.profile == "randn"
    a = _blocks(g, m, nb, case.dtype, case.profile, narrow, specials=15)
    w_dtype = case.dtype if case.entry in ("quantize", "from_linear") else "bf16"
    w_narrow = narrow or torch.rand(1, generator=g).item() < 0.6
    b = _blocks(g, case.n, nb, w_dtype, "randn" if case.profile == "cancel" else case.profile, w_narrow,
                specials=3)
    if case.profile == "cancel":
        # block p(j) of W equals block j; A's block p(j) is minus its block j at a far larger scale
        # than one remainder block, so the exact sum is the remainder
        half = nb // 2
        pairs = [(j, j + half) for j in range(half)] if torch.rand(1, generator=g).item() < 0.5 else \
            [(j, j + 1) for j in range(0, nb - 1, 2)]
        for j, p in pairs:
            b[:, p] = b[:, j]
        paired = {x for pair in pairs for x in pair}
        rest = [j for j in range(nb) if j not in paired] or [pairs.pop()[1]]
        emax = _DTYPES[case.dtype][2]
        big = torch.randint(min(20, emax - 5), min(100, emax - 3), (m, 1), generator=g).to(torch.float64)
        for j, p in pairs:
            a[:, j] = torch.randn(m, BLOCK, generator=g, dtype=torch.float64) * torch.pow(2.0, big)
            a[:, p] = -a[:, j]
        small = torch.randint(-60, 0, (m, 1), generator=g).to(torch.float64)
        a[:, rest[0]] = torch.randn(m, BLOCK, generator=g, dtype=torch.float64) * torch.pow(2.0, small + big)
    a = a.reshape(*case.lead, case.k).to(_DTYPES[case.dtype][0])
    return a, b.reshape(case.n, case.k).to(_DTYPES[w_dtype][0])


# ---- running a case -------------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    elements: int = 0
    identical: int = 0
    failures: list = dataclasses.field(default_factory=list)  # one-line descriptions
    outside_domain: int = 0   # outputs off the contract where its domain is not met (not failures)
    deviations: list = dataclasses.field(default_factory=list)
    on_reference: bool = False


@functools.lru_cache(maxsize=1)
def _shipped_variants():
    from . import plan
    from .bench.shapes import shape_set

    variants = set(plan.load_table().values())
    variants |= {plan.heuristic(plan.Problem(s.m, s.n, s.k)) for s in shape_set("all")}
    return sorted(variants, key=str)


def _kernel_accepts(case: Case) -> bool:
    return case.dtype == "bf16" and case.shuffled and not case.floor_rule


def run_case(case: Case, backend: str, device: torch.device) -> Result:
    """Runs ``case`` through its entry point on ``backend`` ('cuda' or 'reference') and checks it."""
    import mxfp4
    from . import task
    from .nn import MXFP4Linear
    from .tensor import Layout, MXFP4Tensor

    g = torch.Generator().manual_seed(case.seed * 1_000_003 + case.index)
    a, b = make_operands(case, g)
    rule = mxfp4.ScaleRule.FLOOR if case.floor_rule else mxfp4.ScaleRule.AITER
    res = Result()
    if case.entry == "quantize":
        return _check_quantize(case, a, rule, device, res)

    entry, call_backend = case.entry, backend
    if backend == "cuda" and not _kernel_accepts(case):
        entry, call_backend, res.on_reference = "gemm", "reference", True
    if entry == "task" and not (case.shuffled and case.dtype == "bf16" and not case.floor_rule):
        entry = "gemm"

    if entry == "from_linear":
        lin = torch.nn.Linear(case.k, case.n, bias=False, dtype=b.dtype)
        with torch.no_grad():
            lin.weight.copy_(b)
        layer = MXFP4Linear.from_linear(lin.to(device), rule)
        w = layer.weight
        want_codes, want_scales = oracle_quantize(b, case.floor_rule)
        got = w.to_layout(Layout.PLAIN)
        if not (torch.equal(formats.unpack_codes(got.data).cpu(), want_codes)
                and torch.equal(got.scales.cpu(), want_scales)):
            res.failures.append("MXFP4Linear.from_linear: weight bytes differ from the oracle's quantization")
    else:
        w = mxfp4.quantize(b.to(device), rule)
        if case.shuffled:
            w = mxfp4.prepare(w)

    a_dev = a.to(device)
    if case.strided:  # a column slice of a wider buffer: row stride K + 32, 16-byte aligned or not
        wide = torch.zeros(*a.shape[:-1], case.k + 32, dtype=a.dtype, device=device)
        start = 16 if case.index % 2 else 1
        wide[..., start:start + case.k] = a_dev
        a_dev = wide[..., start:start + case.k]
    out_shape = (*case.lead, case.n)
    if device.type == "cuda":  # poison the block torch.empty will hand out next
        torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device=device)
    if entry == "gemm":
        out = mxfp4.gemm_a4w4(a_dev, w, backend=call_backend)
    elif entry == "gemm_out":
        out = torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device=device)
        if mxfp4.gemm_a4w4(a_dev, w, out, backend=call_backend) is not out:
            res.failures.append("gemm_a4w4(out=...) did not return out")
    elif entry == "gemm_params":
        from . import plan
        problem = plan.Problem(int(torch.Size(case.lead).numel()), case.n, case.k)
        fits = [p for p in _shipped_variants() if p.fits(problem)]
        params = fits[case.index % len(fits)] if call_backend == "cuda" else None
        out = mxfp4.gemm_a4w4(a_dev, w, backend=call_backend, params=params)
    elif entry in ("linear", "from_linear"):
        layer = layer if entry == "from_linear" else MXFP4Linear.from_mxfp4(w)
        out = layer(a_dev)
        w = layer.weight
    elif entry == "op":
        out = torch.ops.mxfp4.gemm_a4w4(a_dev, w.data, w.scales, case.n, case.k, w.layout is Layout.AITER_SHUFFLED,
                                        case.floor_rule)
    else:
        out = task.custom_kernel((a_dev, None, None, w.data, w.scales))
    if tuple(out.shape) != out_shape or out.dtype != torch.bfloat16:
        res.failures.append(f"output is {out.dtype} {tuple(out.shape)}, want bfloat16 {out_shape}")
        return res

    wp = MXFP4Tensor(w.data.cpu(), w.scales.cpu(), w.shape, w.layout, w.scale_rule).to_layout(Layout.PLAIN)
    a_codes, a_scales = oracle_quantize(a.reshape(-1, case.k), case.floor_rule)
    exact = oracle_gemm(a_codes, a_scales, formats.unpack_codes(wp.data), wp.scales)
    on_cuda = call_backend == "cuda" or (backend == "cuda" and entry in ("linear", "from_linear", "op", "task"))
    return _compare(out.reshape(-1, case.n).cpu(), exact, on_cuda, res)


def _compare(out: torch.Tensor, exact: Exact, cuda: bool, res: Result) -> Result:
    o = out.to(torch.float64)
    want = exact.bf16.to(torch.float64)
    same = (o == want) | (torch.isnan(o) & torch.isnan(want))
    res.elements += o.numel()
    res.identical += int(same.sum())
    nan_bad = torch.isnan(o) != torch.isnan(exact.value)
    inf_bad = torch.isinf(o) != torch.isinf(want)
    both = torch.isfinite(o) & torch.isfinite(want)
    bound = ulp_bf16(exact.value) + 2.0 ** -20 * exact.magnitude
    err = (o - exact.value).abs()
    over = both & (err > bound)
    if cuda:  # the bound and NaN/Inf, inside the kernel's stated domain
        domain, rule = exact.in_domain, "bound"
        bad = (over | nan_bad | inf_bad) & domain
        outside = (over | nan_bad | inf_bad) & ~domain
    else:  # the reference: bit-exact everywhere, NaN and Inf included
        rule = "bit-exact"
        bad = ~same
        outside = torch.zeros_like(bad)
    res.outside_domain += int(outside.sum())
    for mask, sink, what in ((bad, res.failures, f"break the {rule} contract"),
                             (outside, res.deviations, "deviate outside the stated domain")):
        if mask.any():
            i, j = mask.nonzero()[0].tolist()
            sink.append(f"{int(mask.sum())} of {o.numel()} outputs {what}; first [{i}, {j}]: "
                        f"out {o[i, j].item():.9g}, exact {exact.value[i, j].item():.9g}, "
                        f"bf16(exact) {want[i, j].item():.9g}, bound {bound[i, j].item():.3g}")
    return res


def _check_quantize(case: Case, x: torch.Tensor, rule, device: torch.device, res: Result) -> Result:
    import mxfp4

    q = mxfp4.quantize(x.to(device), rule)
    codes, scales = oracle_quantize(x, case.floor_rule)
    got_codes, got_scales = formats.unpack_codes(q.data).cpu(), q.scales.cpu()
    res.elements += x.numel()
    res.identical += int((got_codes == codes).sum())
    if not torch.equal(got_codes, codes) or not torch.equal(got_scales, scales):
        bad = (got_codes != codes).reshape(-1, case.k).nonzero()
        where = f"first code [{bad[0, 0].item()}, {bad[0, 1].item()}]" if len(bad) else "scales only"
        res.failures.append(f"quantize: {int((got_codes != codes).sum())} codes, "
                            f"{int((got_scales != scales).sum())} scale bytes differ; {where}")
    want = oracle_values(codes, scales)
    forms = [q]
    if len(case.lead) == 1 and case.n and case.lead[0] % 16 == 0 and case.k % 64 == 0:
        forms.append(mxfp4.prepare(q))
    for t in forms:
        got = mxfp4.dequantize(t, torch.float64).cpu()
        if not torch.equal(torch.isnan(got), torch.isnan(want)) or not torch.equal(got.nan_to_num(), want.nan_to_num()):
            res.failures.append(f"dequantize ({t.layout.name}, float64) differs from the oracle's values")
    return res


# ---- the command ----------------------------------------------------------------------------------

def reproducer(case: Case, backend: str) -> str:
    return f"mxfp4 fuzz --seed {case.seed} --case {case.index} --backend {backend}"


def resolve(backend: str) -> tuple[str, torch.device]:
    """('cuda' | 'reference', device) for ``--backend``; 'auto' takes the kernels on a Hopper GPU."""
    from . import ops

    hopper = torch.cuda.is_available() and ops.cuda_supported(torch.device("cuda"))
    if backend == "cuda" and not hopper:
        raise ValueError("--backend cuda needs a Hopper GPU (sm_90)")
    if backend == "cuda" or (backend == "auto" and hopper):
        return "cuda", torch.device("cuda")
    return "reference", torch.device("cpu")


@dataclasses.dataclass
class Totals:
    cases: int = 0
    elements: int = 0
    identical: int = 0
    failed_cases: int = 0
    outside_domain: int = 0
    on_reference: int = 0
    lines: list = dataclasses.field(default_factory=list)
    deviation_lines: list = dataclasses.field(default_factory=list)


def run(seed: int, indices, backend: str, device: torch.device, verbose: bool = False) -> Totals:
    t = Totals()
    for i in indices:
        case = draw_case(seed, i)
        try:
            r = run_case(case, backend, device)
        except Exception as e:  # an entry point raising on a valid input is a failure too
            r = Result(failures=[f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"])
        t.cases += 1
        t.elements += r.elements
        t.identical += r.identical
        t.outside_domain += r.outside_domain
        t.on_reference += r.on_reference
        if r.failures:
            t.failed_cases += 1
            t.lines.append(f"{reproducer(case, backend)}  # {case.describe()}: {'; '.join(r.failures)}")
        if r.deviations:
            t.deviation_lines.append(f"{reproducer(case, backend)}  # {case.describe()}: {'; '.join(r.deviations)}")
        if verbose:
            print(f"case {i}: {case.describe()}{' (on reference)' if r.on_reference else ''}: {r.elements} elements, "
                  f"{r.identical} identical, {r.outside_domain} outside the domain "
                  f"{'; '.join(r.deviations)}, {'FAILED ' + '; '.join(r.failures) if r.failures else 'ok'}")
    return t


def _worker(job):
    seed, indices, backend, device = job
    torch.set_num_threads(1)
    return run(seed, indices, backend, torch.device(device))


def fuzz(cases: int, seed: int, backend: str = "auto", case: int | None = None, jobs: int = 1,
         out=None) -> int:
    """Runs the cases, prints the failures (one reproducer a line) and the counts; returns 1 on failure.
    ``jobs`` 0: half the CPUs, at most 8 (the host side, case generation and the oracle, is the cost)."""
    import os

    out = out or sys.stdout
    chosen, device = resolve(backend)
    if jobs <= 0:
        jobs = max(1, min(8, (os.cpu_count() or 2) // 2))
    jobs = min(jobs, max(cases, 1))
    start = time.perf_counter()
    if case is not None:
        t = run(seed, [case], chosen, device, verbose=True)
    elif jobs > 1:
        import multiprocessing as mp

        chunks = [(seed, range(j, cases, jobs), chosen, str(device)) for j in range(jobs)]
        t = Totals()
        with mp.get_context("spawn").Pool(jobs) as pool:
            for part in pool.imap_unordered(_worker, chunks):
                for f in dataclasses.fields(Totals):
                    setattr(t, f.name, getattr(t, f.name) + getattr(part, f.name))
    else:
        t = run(seed, range(cases), chosen, device)
    for line in t.lines:
        print(line, file=out)
    if t.deviation_lines:
        print(f"{len(t.deviation_lines)} cases deviate outside the stated domain (not failures; first 10):", file=out)
        for line in t.deviation_lines[:10]:
            print(f"  {line}", file=out)
    where = "CUDA kernels" if chosen == "cuda" else "reference"
    print(f"mxfp4 fuzz seed {seed} on the {where} ({device}): {t.cases} cases "
          f"({t.on_reference} that the kernel does not take ran on the reference), {t.elements} elements, "
          f"{100.0 * t.identical / max(t.elements, 1):.4f}% bit-identical to the exact result rounded to bf16, "
          f"{t.outside_domain} outputs off the contract outside its stated domain, {t.failed_cases} failed cases "
          f"in {time.perf_counter() - start:.1f} s", file=out)
    return 1 if t.failed_cases else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", type=int, default=2000, help="number of cases (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=("auto", "cuda", "reference"), default="auto")
    p.add_argument("--case", type=int, help="replay one case of the seed, verbosely")
    p.add_argument("--jobs", type=int, default=0,
                   help="worker processes, each with its own CUDA context (default: half the CPUs, at most 8)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mxfp4.fuzz", description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--bad-inputs-table", action="store_true", help="print docs/bad_inputs.md and exit")
    args = p.parse_args(argv)
    if args.bad_inputs_table:
        from .bad_inputs import markdown_table

        print(markdown_table(), end="")
        return 0
    return fuzz(args.cases, args.seed, args.backend, args.case, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
