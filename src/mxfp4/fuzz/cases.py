"""The fuzzer's cases: case ``i`` of seed ``S`` drawn from ``random.Random(f"{S}:{i}")`` alone (entry
point, layout, dtypes, scale rule, shapes), and its operands, block by block over the whole input range.
"""
from __future__ import annotations

import dataclasses
import random

import torch

from .oracle import BLOCK

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
# --large-m: rows of A the large-M kernels take (plan.WGMMA_MIN_M on), both token tiles, partial tiles,
# the int8-weight kernel (plan.WGMMA_INT8_MIN_M on)
_M_LARGE = (33, 47, 64, 65, 95, 96, 100, 127, 128, 129, 160, 191, 192, 200, 255, 256, 257, 288, 300, 333, 384, 449, 512,
            513, 577, 640)
_N_LARGE = (16, 48, 64, 112, 128, 144, 192, 256, 272, 384)
_MAX_MNK = 1 << 22  # keeps a case to a few milliseconds of oracle time
# --grouped: experts, an expert's N and K, and its rows (none, one, a decode count, a prefill count)
_E_GROUPED = (1, 2, 3, 5, 8, 16, 64, 130)
_N_GROUPED = (16, 40, 128, 256, 1000)
_K_GROUPED = (64, 96, 256, 544, 1024)
GROUPED_VARIANTS = ("heuristic", "stream 8", "stream 16", "large-m tn 64", "large-m tn 128")
_BIASED = ("gemm", "gemm_out", "linear", "op")  # the entry points that take a bias


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
    large_m: bool = False  # drawn for the large-M kernel (``mxfp4 fuzz --large-m``)
    bias: bool = False     # a bias [N] added before the one rounding (gemm, gemm_out, linear, op; grouped: [E, N])
    counts: tuple = ()     # entry grouped: each expert's rows (``mxfp4 fuzz --grouped``)
    variant: str = ""      # entry grouped: the kernel forced on the GPU (GROUPED_VARIANTS)
    off64: bool = False    # entry grouped: int64 offsets

    def describe(self) -> str:
        grouped = (f" E={len(self.counts)} rows={list(self.counts) if len(self.counts) <= 8 else sum(self.counts)} "
                   f"variant={self.variant}{' int64' if self.off64 else ''}") if self.counts else ""
        return (f"entry={self.entry} {'AITER_SHUFFLED' if self.shuffled else 'PLAIN'} {self.dtype} "
                f"{'FLOOR' if self.floor_rule else 'AITER'} A{list(self.lead) + [self.k]} N={self.n} "
                f"profile={self.profile}{' strided' if self.strided else ''}{' bias' if self.bias else ''}{grouped}")


def draw_case(seed: int, index: int, large_m: bool = False, grouped: bool = False) -> Case:
    """Case ``index`` of ``seed``; ``large_m`` draws only what the large-M kernel takes (shuffled bf16
    A with the aiter rule, M from ``plan.WGMMA_MIN_M`` on) through every entry point that reaches it;
    ``grouped`` draws grouped GEMMs of a mixture of experts (``grouped_gemm_a4w4``)."""
    if large_m:
        return _draw_large_m(seed, index)
    if grouped:
        return _draw_grouped(seed, index)
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
    # drawn from a stream of its own, so that the other draws of a seed's cases stay as they were
    bias = entry in _BIASED and random.Random(f"bias {seed}:{index}").random() < 0.25
    return Case(seed, index, entry, shuffled, dtype, floor_rule, lead, n, k, profile, strided, bias=bias)


def _draw_large_m(seed: int, index: int) -> Case:
    r = random.Random(f"large-m {seed}:{index}")
    entry = r.choices(("gemm", "gemm_out", "linear", "from_linear", "op", "task"), (30, 12, 10, 8, 15, 25))[0]
    profile = r.choices(("randn", "wide", "mixed", "cancel"), (30, 25, 35, 10))[0]
    m, n, k = r.choice(_M_LARGE), r.choice(_N_LARGE), r.choice(_K64 + (1536, 2048))
    if profile == "cancel":
        k = max(k, 128)
    while m * n * k > _MAX_MNK:  # shrink K, then N: M stays on the large-M kernel
        if k > 256:
            k = (k // 2) // 64 * 64
        elif n > 64:
            n = max(16, (n // 2) // 16 * 16)
        else:
            break
    lead = (m,)
    if entry != "task" and m % 2 == 0 and r.random() < 0.15:
        lead = (2, m // 2)
    strided = r.random() < 0.15
    bias = entry in _BIASED and random.Random(f"large-m bias {seed}:{index}").random() < 0.25
    return Case(seed, index, entry, True, "bf16", False, lead, n, k, profile, strided, True, bias)


def _draw_grouped(seed: int, index: int) -> Case:
    """A grouped GEMM: E experts of [N, K], each expert's rows none, one, 2..16 (decode) or 17..140
    (prefill), A in any dtype, int32 or int64 offsets, a kernel forced or the heuristic's, a bias [E, N]
    for a quarter of the cases."""
    r = random.Random(f"grouped {seed}:{index}")
    e, n, k = r.choice(_E_GROUPED), r.choice(_N_GROUPED), r.choice(_K_GROUPED)
    while e * n * k > _MAX_MNK and n > 16:  # the experts' weights stay a few million elements
        n = max(16, n // 2)
    counts = [r.choice((0, 1, r.randint(2, 16), r.randint(2, 16), r.randint(17, 140))) for _ in range(e)]
    while sum(counts) * n * k > _MAX_MNK:
        counts = [c // 2 for c in counts]
    if not sum(counts):
        counts[r.randrange(e)] = 1
    profile = r.choices(("randn", "wide", "mixed"), (40, 25, 35))[0]
    dtype = r.choices(("bf16", "fp16", "fp32"), (70, 15, 15))[0]
    variant = r.choice(GROUPED_VARIANTS)
    off64 = r.random() < 0.3
    bias = random.Random(f"grouped bias {seed}:{index}").random() < 0.25
    return Case(seed, index, "grouped", True, dtype, False, (sum(counts),), n, k, profile, False, False, bias,
                tuple(counts), variant, off64)


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


def make_bias(case: Case, g: torch.Generator) -> torch.Tensor:
    """The case's bias [N]: randn times 2**e, e per element in -8..8 ('wide' and 'mixed': from the
    dtype's smallest normal to 2**100, far from where the biased total could round to Inf), zeros
    among them; in the activations' dtype (bf16 for the layer, whose dtype it is)."""
    dtype = "bf16" if case.entry == "linear" else case.dtype
    _, emin, emax, bits = _DTYPES[dtype]
    lo, hi = (-8, 8) if case.profile in ("randn", "cancel") else (emin + bits, min(emax - 3, 100))
    e = torch.randint(lo, hi + 1, (case.n,), generator=g).to(torch.float64)
    b = torch.randn(case.n, generator=g, dtype=torch.float64) * torch.pow(2.0, e)
    b = torch.where(torch.rand(case.n, generator=g) < 0.1, torch.zeros_like(b), b)
    return b.to(_DTYPES[dtype][0])


def make_grouped_operands(case: Case, g: torch.Generator):
    """(A [T, K] in the case's dtype, the experts' float weights [E, N, K] in bf16, a bias [E, N] or None)."""
    nb, narrow = case.k // BLOCK, case.profile == "randn"
    t = sum(case.counts)
    a = _blocks(g, t, nb, case.dtype, case.profile, narrow, specials=15).reshape(t, case.k).to(_DTYPES[case.dtype][0])
    ws = torch.stack([_blocks(g, case.n, nb, "bf16", case.profile, narrow or torch.rand(1, generator=g).item() < 0.6,
                              specials=3).reshape(case.n, case.k).to(torch.bfloat16) for _ in case.counts])
    bias = torch.stack([make_bias(case, g) for _ in case.counts]) if case.bias else None
    return a, ws, bias


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
