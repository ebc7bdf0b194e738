"""How a GEMM launch is chosen: the heuristics, the tuned table and ``choose``, among the kernels'
parameter sets (:mod:`mxfp4.params`, named here too: ``plan.SmallParams`` is ``params.SmallParams``).

Up to ``STREAM_MAX_M`` rows three kernels run, each shape the fastest: ``SmallParams`` fixes one
variant of ``cuda/csrc/gemm_small.cu`` (one launch at short K, A's quantization shared by a cluster
along N; tiles of tokens along the grid's y, so the table may name it up to ``TABLE_MAX_M`` rows),
``StreamParams`` one of ``cuda/csrc/gemm_stream.cu`` (A quantized once, then the weight streamed with
every SM an equal share), ``BandParams`` one of ``cuda/csrc/gemm_band.cu`` (the same with A in bands and the
block sums of a segment added inside the tensor core: 17..32 rows of a large weight), ``DecodeParams`` one of
``cuda/csrc/gemm_decode.cu`` (A quantized once, then the GEMM; the table names it where it measured
fastest). ``WgmmaParams`` fixes one variant of
``cuda/csrc/gemm_wgmma.cu``, the kernels for M >= ``WGMMA_MIN_M``. ``choose`` returns the table's
entry for the shape when the shipped table has one (up to ``TABLE_MAX_M`` rows), otherwise
``heuristic``. ``grouped_heuristic`` picks the grouped GEMM: ``GroupedStreamParams`` (the streaming GEMM,
decode) or ``GroupedWgmmaParams`` (the large-M kernels, prefill).
"""
from __future__ import annotations

import dataclasses
import json
import pathlib

from .params import (BAND_MAX_K, MAX_GRID_Y, SEGMENT_BLOCKS, SMEM_LIMIT, BandParams, DecodeParams,
                     GroupedStreamParams, GroupedWgmmaParams, Problem, SmallParams, StreamParams, WgmmaParams, valid)

KernelParams = SmallParams | DecodeParams | StreamParams | BandParams | WgmmaParams
"""The parameter set of one dense GEMM call, whichever kernel it runs."""
KERNEL_PARAMS = (SmallParams, DecodeParams, StreamParams, BandParams, WgmmaParams)
GroupedKernelParams = GroupedStreamParams | GroupedWgmmaParams
"""The parameter set of one grouped GEMM call (a mixture of experts), whichever kernel it runs."""

TABLE_PATH = pathlib.Path(__file__).with_name("configs") / "h200.json"

WGMMA_MIN_M = 33
"""From this many rows of A on, the large-M kernel (wgmma) runs. H200, ten model projections, L2
flushed, against four mma.sync tilings: at 48 and 64 rows it is the fastest on six at both sizes
(64x4608x7168: 67 us against 117), within 4% of the best on two more (2112x7168, 3072x1536), and
23-58% slower at K = 512, where its two launches take 17-21 us at any M; at 24 and 32 rows it is
the fastest on five of the ten."""

WGMMA_TN64, WGMMA_TN128, WGMMA_INT8 = WgmmaParams(64, 3), WgmmaParams(128, 4), WgmmaParams(128, 3, True)
"""The compiled variants ``wgmma_params`` chooses among (its K split is a launch choice)."""

WGMMA_INT8_MIN_M = 513
"""From this many rows on, the weight as int8 from the prep (``mxfp4_gemm_i8``); below, the GEMM that
converts the weight's codes in shared memory (``mxfp4_gemm_cv``). H200, L2 flushed, same run:
512x7168x2048 42.9 us (converting) against 47.4 (int8 weight), 1024x7168x2048 79.5 against 76.5,
4096x7168x7168 754 against 632, 8192^3 1883 against 1526 (the int8-weight GEMM before its zero-atom
fold, which took 6-9% off it since: docs/design.md)."""


def wgmma_params(p: Problem, sm_count: int = 132) -> WgmmaParams:
    """The large-M kernels' variant: up to 512 rows the GEMM that converts the weight's codes in shared
    memory, on 64-token tiles (128-token tiles from 65 rows where 64-token ones would need more than
    one wave of CTAs), K split over a cluster while the grid has fewer CTAs than the SMs (clusters
    of 2, 4 or 8: clusters of 3, 5 or 7 CTAs left SMs idle); above, the weight as int8 from the prep
    (``int8_weight``, 128-token tiles). H200, L2 flushed, same run, against the GEMM this replaced
    (the codes converted in registers): 256x3072x1536 17.4 us against 19.9, 64x7168x2048 (split 2)
    16.8 against 17.7, 64x2880x4096 (split 4) 17.9 against 20.4, 64x24576x1536 30.6 against 34.3,
    128x7168x2048 20.8 against 23.5 (BENCHMARKS.md; model-like data 10-19% faster)."""
    if p.m >= WGMMA_INT8_MIN_M:
        return WGMMA_INT8
    base = WGMMA_TN64
    if p.m > 64 and base.tiles(p) > sm_count:  # more than one wave: halve the token tiles
        base = WGMMA_TN128
    ctas = base.tiles(p)
    nseg = -(-p.blocks // SEGMENT_BLOCKS)
    split = 1
    while split < 8 and 2 * split * ctas <= sm_count and 2 * split <= nseg:
        split *= 2
    return dataclasses.replace(base, split=split)


SMALL_MAX_K = 512
"""Up to this K (and 32 rows), shapes without a table entry take the short-K kernel (``small_heuristic``).
H200, L2 flushed, same run, against the tuned entries of the one-launch kernel it replaced there:
1x4096x512 5.9 us against 8.0, 4x2880x512 6.0 against 8.0, 8x4096x512 6.2 against 8.3, 16x4096x512
6.8 against 8.2, 32x2880x512 7.0 against 9.0, 32x4096x512 8.0 against 9.3 (cuBLAS bf16 6.6-7.2)."""


def small_heuristic(p: Problem) -> SmallParams | None:
    """The short-K kernel's variant for ``p`` (at most 32 rows), or None: CTAs of two 16-row groups
    with four warps a group, A's quantization shared by a cluster of 2 CTAs up to 16 rows and 8 from
    17 (the fastest of 5-8 tiles at five of the six K = 512 shapes measured; at 32x4096x512 8.28 us
    against the best tile's 8.03, which the table names)."""
    if p.m > 32 or p.k > SMALL_MAX_K:
        return None
    mt = -(-p.m // 8)
    kw = next(w for w in (4, 2, 1) if p.blocks % w == 0)
    clusters = (2, 1) if mt <= 2 else (8, 4, 2, 1)
    return next((s for s in (SmallParams(2, kw, mt, p.blocks, c) for c in clusters) if valid(s)), None)


STREAM_RING_WEIGHT_BYTES = 160 * 1024
"""Weight bytes the streaming GEMM's ring holds at most (stages x 16 g x ks x 16 bytes), where shared
memory allows: about 5 us of an SM's share of the H200's 4.3 TB/s."""

STREAM_MAX_M = 32
"""The streaming GEMM's rows at most (the heuristic's; 64x8192x8192 ran 61.5 us on it against the
large-M kernels' 34.0, H200)."""


def _deepest_ring(make, most: int):
    """``make(stages)`` (a streaming GEMM's parameters) with the deepest ring that fits shared memory, at most
    ``most`` stages and ``STREAM_RING_WEIGHT_BYTES`` of weight (16 bytes a tile row and block), at least 2."""
    one = make(1)
    stages = max(2, min(most, STREAM_RING_WEIGHT_BYTES // (16 * one.rows * one.ks)))
    while stages > 2 and make(stages).smem_bytes() > SMEM_LIMIT:
        stages -= 1
    return make(stages)


def stream_params(mt: int, g: int, kw: int, ks: int, sign_split: bool = False, one_token: bool = False) -> StreamParams:
    """The streaming GEMM with the deepest ring that fits (``_deepest_ring``, up to 16 stages)."""
    return _deepest_ring(lambda st: StreamParams(mt, g, kw, ks, st, sign_split=sign_split, one_token=one_token), 16)


def stream_heuristic(p: Problem, sm_count: int = 132) -> StreamParams | None:
    """The streaming GEMM for ``p`` (at most ``STREAM_MAX_M`` rows; else None): 16 consumer warps on
    units of 32 blocks, tiles of 128 weight rows (two warps a group) where every CTA gets 8 units or
    more within 10% of the mean, else of 64 rows (four warps a group) within 15%, else (and at 32
    rows where 32-block units share out worse) 64 rows by 16 blocks; the codes' signs split over two
    MMAs up to 16 rows. H200, L2 flushed, same runs: 1x57344x8192 90.4 us on 128 x 32 against 98.3
    on 64 x 32 and 107.9 on 128 x 16 (the first form, 64 x 16 on 9 warps with one copy-issuing
    thread: 144.7); 16x8192x8192 28.8 on 64 x 32 against 30.0 on 128 x 32; 32x2880x4096 17.2 on
    64 x 16 against 18.2 on 64 x 32. The split: 1x57344x8192 112.1 against 124.2, 1x8192x28672 60.9
    against 68.1, 16x57344x8192 143.8 against 144.4; at 32 rows 32x57344x8192 190.4 against 182.9
    without it."""
    if p.m > STREAM_MAX_M:
        return None
    mt = next(t for t in (1, 2, 4) if 8 * t >= p.m)
    split, one = mt <= 2, p.m == 1
    wide, narrow, short = (stream_params(mt, 8, 2, 32, split, one), stream_params(mt, 4, 4, 32, split, one),
                           stream_params(mt, 4, 4, 16, split, one))

    def loss(params: StreamParams) -> float:
        units, grid = params.units(p), params.grid(p, sm_count)
        return -(-units // grid) * grid / units

    if mt <= 2 and wide.units(p) >= 8 * wide.grid(p, sm_count) and loss(wide) <= 1.1:
        return wide
    if loss(narrow) <= 1.15:
        return narrow
    return min((short, narrow) if mt == 4 else (wide, narrow, short), key=loss)


BAND_MIN_M = 17
BAND_MIN_WEIGHT = 100_000_000
"""The banded GEMM runs from ``BAND_MIN_M`` rows (to ``STREAM_MAX_M``) on weights of at least this many
elements (N x K). H100, L2 flushed, one run, against the streaming GEMM's heuristic choice: 32x57344x8192
151.4 us against 176.2, 32x13312x16384 80.4 against 88.1, 32x8192x28672 88.9 against 93.6, 24x16384x6656
(1.09e8 elements) 49.6 against 52.3; it lost at 32x8192x8192 (6.7e7: 40.0 against 36.4) and at up to 16 rows
(16x57344x8192 132.9 against 119.0, 1x57344x8192 111.6 against 101.6): docs/experiments.md."""


def band_params(mt: int, wg: int, ks: int, depth: int = 4, sign_split: bool = False) -> BandParams:
    """The banded GEMM with the deepest ring that fits (``_deepest_ring``, up to 8 stages)."""
    return _deepest_ring(lambda st: BandParams(mt, wg, ks, st, depth, sign_split), 8)


def band_heuristic(p: Problem) -> BandParams | None:
    """The banded GEMM for ``p`` (``BAND_MIN_M`` .. ``STREAM_MAX_M`` rows, a weight of at least
    ``BAND_MIN_WEIGHT`` elements, K at most ``params.BAND_MAX_K``; else None): 32-token tiles of 128 weight
    rows (two warpgroups) by units of 16 blocks, one wgmma a block on signed codes: the fastest of the sweep
    (one to three warpgroups, units of 16 or 32 blocks, signs split or not) at the four shapes above (H100;
    the split within 1%)."""
    if not (BAND_MIN_M <= p.m <= STREAM_MAX_M and p.n * p.k >= BAND_MIN_WEIGHT and p.k <= BAND_MAX_K):
        return None
    return band_params(4, 2, 16)


def heuristic(p: Problem, sm_count: int = 132) -> KernelParams:
    """A launch for any shape: the short-K kernel up to ``SMALL_MAX_K`` and 32 rows
    (``small_heuristic``), else the banded GEMM where ``band_heuristic`` takes the shape, else the streaming
    GEMM up to ``STREAM_MAX_M`` rows (``stream_heuristic``), else the large-M kernels (``wgmma_params``)."""
    small = small_heuristic(p) if p.k <= SMALL_MAX_K else None
    if small is not None:
        return small
    band = band_heuristic(p)
    if band is not None:
        return band
    stream = stream_heuristic(p, sm_count)
    return stream if stream is not None else wgmma_params(p, sm_count)


GROUPED_STREAM_MAX_ROWS = 16
"""The streaming GEMM's grouped build runs while a non-empty expert's mean rows, T / min(E, T), are at most
this many (decode); above it the large-M kernels grouped (prefill). H100, L2 flushed, randn, one run, us
(DeepSeek-R1 gate_up, down, GPT-OSS gate_up, down), chunks of 8 / chunks of 16 / the grouped large-M
kernels on tn 64: at 4 rows an expert (128 tokens) 1490 / 1689 / 2822, 698 / 819 / 1663, 431 / 502 / 960,
233 / 265 / 538; at 8 rows 2123 / 1752 / 2897, 991 / 848 / 1713, 592 / 511 / 968, 314 / 270 / 543; at 16
rows 3669 / 2503 / 2913, 1685 / 1202 / 1725, 1015 / 725 / 982, 531 / 382 / 546; at 32 rows 6595 / 4300 /
2930, 3040 / 2052 / 1778, 1814 / 1221 / 995, 939 / 642 / 557. Chunks of 32 rows (64-row tiles: 128 do not
fit) lost to one of the others at every point."""

GROUPED_TN128_MIN_ROWS = 48
"""From this many mean rows an expert the grouped large-M kernels take token tiles of 128 rows, below it of
64 (fewer empty rows in an expert's last tile). H100, L2 flushed, randn, us (DeepSeek-R1 gate_up, down, GPT-OSS
gate_up, down; docs/experiments.md, the grouped kernels at prefill sizes): at 32 rows (1024 tokens) tn 64
2952, 1775, 990, 548 us against tn 128's 3719, 2171, 1221, 699; at 64 rows 4218, 2526, 1377, 762 against
3809, 2231, 1249, 718; at 128 rows 7189, 4262, 2393, 1315 against 5619, 3266, 1842, 1052."""

GROUPED_WGMMA, GROUPED_WGMMA_TN128 = GroupedWgmmaParams(WGMMA_TN64), GroupedWgmmaParams(WGMMA_TN128)
"""The grouped large-M variants ``grouped_heuristic`` chooses between."""


def grouped_heuristic(t: int, e: int, n: int, k: int, sm_count: int = 132) -> GroupedKernelParams:
    """The grouped GEMM's variant for T rows over E experts of [n, k] (n: an expert's N16 rows): by a
    non-empty expert's mean rows, the streaming GEMM's grouped build up to ``GROUPED_STREAM_MAX_ROWS``
    (``grouped_stream_tile``: chunks of 8 rows up to 4 rows an expert, else of 16, the faster at the sweep's
    4 and 8 rows, its docstring; an expert beyond a chunk takes more chunks, each streaming its weight
    again), then the large-M kernels grouped on token tiles of 64 rows, from ``GROUPED_TN128_MIN_ROWS`` of
    128. Up to 128 tokens the grouped streaming GEMM took 0.26-0.30x bf16 ``_grouped_mm`` and 1.04-1.22x the
    touched experts' stream floor from 16 tokens (H100; BENCHMARKS.md)."""
    mean = -(-t // min(e, t))
    large = GROUPED_WGMMA_TN128 if mean >= GROUPED_TN128_MIN_ROWS else GROUPED_WGMMA
    if mean > GROUPED_STREAM_MAX_ROWS:
        return large
    return grouped_stream_tile(1 if mean <= 4 else 2, t, e, n, k, sm_count) or large


def grouped_stream_tile(mt: int, t: int, e: int, n: int, k: int, sm_count: int = 132) -> GroupedStreamParams | None:
    """The streaming GEMM's grouped variant of chunks of 8 * mt rows for T rows over E experts of [n, k]: tiles of
    128 weight rows on 16 warps by units of 32 blocks (the dense heuristic's tile for a large weight), or of 64
    rows (four warps a group) where min(E, T) experts' units would give the CTAs fewer than 8 each (a token's few
    experts), the codes' signs split; each with the deepest ring that fits beside the experts' table (None
    where none does). H100, L2 flushed, randn, one run, us (chunks of 8 rows; 128-row tiles / 64-row tiles;
    DeepSeek-R1 gate_up, down, GPT-OSS gate_up, down): one token 66.3 / 67.2, 42.3 / 41.8, 32.1 / 29.6,
    24.0 / 21.2; 16 tokens 568 / 634, 279 / 331, 167 / 190, 95 / 103 (128 tokens likewise; 64-row tiles of 16
    blocks, or 128-row tiles of 16, slower at every point)."""
    wide = _grouped_ring(mt, 8, 2, 32, e)
    if wide is not None and min(e, t) * wide.tile.units(Problem(8 * mt, n, k)) >= 8 * sm_count:
        return wide
    return _grouped_ring(mt, 4, 4, 32, e) or wide


GROUPED_RING_EXPERTS = 1024
"""The grouped streaming GEMM's rings are cut to fit beside the table of this many experts (or of E, if more), so
that one variant serves every model up to it."""


def _grouped_ring(mt: int, g: int, kw: int, ks: int, e: int) -> GroupedStreamParams | None:
    """``stream_params``' tile grouped, its ring cut to the deepest that fits beside the experts' table
    (``GROUPED_RING_EXPERTS``, or E if more)."""
    tile = stream_params(mt, g, kw, ks, sign_split=True)
    for stages in range(tile.stages, 1, -1):
        params = GroupedStreamParams(dataclasses.replace(tile, stages=stages))
        if params.fits(Problem(8 * mt, 16, 64), max(e, GROUPED_RING_EXPERTS)):
            return params
    return None


KERNELS = {"small": SmallParams, "decode": DecodeParams, "stream": StreamParams, "band": BandParams,
           "wgmma": WgmmaParams}
"""The table's kernel names: the short-K kernel, the two-launch decode kernels, the streaming GEMM, the banded
GEMM and the large-M kernels."""

TABLE_MAX_M = 64
"""The table steers shapes up to this many rows; from 33 rows its entries choose among the short-K
kernel on tiles of 32 or 64 tokens, the decode kernels and the large-M kernels (``tune.candidates``
times all three), which at 40..64 rows each win on some projections (H200: the short-K kernel at
64x3072x1536, 11.5 us against the decode kernels' 16.6, and at 64x4096x512, 8.1 against the large-M
kernels' 10.6; the large-M GEMM with K split 4 at 64x2112x7168, 26.2 against the decode kernels' 35.3;
the large-M kernels at 64x7168x2048, 17.5 against the short-K kernel's 20.8). Shapes without an entry
take the large-M kernels from ``WGMMA_MIN_M`` rows. Above it the large-M kernels always run."""


def kernel_name(params: KernelParams) -> str:
    return next(name for name, cls in KERNELS.items() if isinstance(params, cls))


def load_table(path: pathlib.Path = TABLE_PATH) -> dict[tuple[int, int, int], KernelParams]:
    """The tuned table: (m, n, k) -> the parameters of the entry's "kernel" (a name of ``KERNELS``). A
    missing file is an empty table."""
    try:
        raw = json.loads(pathlib.Path(path).read_text())
    except FileNotFoundError:
        return {}
    table = {}
    for entry in raw.get("entries", []):
        kind = entry.get("kernel")
        if kind not in KERNELS:
            raise ValueError(f"table entry {entry}: kernel must be one of {sorted(KERNELS)}")
        params = KERNELS[kind](**entry["params"])
        params.check()
        table[(entry["m"], entry["n"], entry["k"])] = params
    return table


def choose(p: Problem, table: dict[tuple[int, int, int], KernelParams],
           sm_count: int = 132) -> KernelParams:
    """The table's entry for the exact shape (up to ``TABLE_MAX_M`` rows); else the large-M kernels
    from ``WGMMA_MIN_M`` rows on, else the heuristic."""
    params = table.get((p.m, p.n, p.k)) if p.m <= TABLE_MAX_M else None
    if params is not None and params.fits(p):
        return params
    if p.m >= WGMMA_MIN_M:
        return wgmma_params(p, sm_count)
    return heuristic(p, sm_count)


def float32_output(params: KernelParams | GroupedKernelParams) -> KernelParams | GroupedKernelParams:
    """The variant of ``params`` that writes the unrounded float32 total (``out_f32``; a grouped kernel's
    through its tile's)."""
    if isinstance(params, (GroupedStreamParams, GroupedWgmmaParams)):
        return dataclasses.replace(params, tile=dataclasses.replace(params.tile, out_f32=True))
    return dataclasses.replace(params, out_f32=True)


def shipped_variants(shapes: list[tuple[int, int, int]]) -> list[KernelParams]:
    """Every compiled variant a call can take: the table's entries and what ``choose`` gives for
    ``shapes``, each with its float32-output twin (split is a launch choice: variants differing
    only in it compile once), and the grouped kernel's (``shipped_grouped_variants``)."""
    table = load_table()
    variants = set(table.values()) | {choose(Problem(m, n, k), table) for m, n, k in shapes}
    variants |= {WGMMA_TN64, WGMMA_TN128, WGMMA_INT8}  # every variant wgmma_params gives
    return sorted(variants | {float32_output(p) for p in variants} | set(shipped_grouped_variants()), key=str)


GROUPED_SHAPES = ((256, 4096, 7168), (256, 7168, 2048), (128, 5760, 2880), (128, 2880, 2880))
"""(E, N, K) of the mixture-of-experts projections the grouped kernel ships for: DeepSeek-R1's gate_up and
down, GPT-OSS's gate_up and down (N16 rows)."""

GROUPED_ROWS = (1, 4, 8, 16, 64, 128, 512, 1024, 4096, 16384, 32768)
"""Rows T (tokens times top-k) of a grouped call that shipped_grouped_variants covers."""


def shipped_grouped_variants() -> list[GroupedKernelParams]:
    """The grouped kernels' variants ``grouped_heuristic`` gives for GROUPED_SHAPES at GROUPED_ROWS, each with
    its float32-output twin (a call with a bias)."""
    found = {grouped_heuristic(t, e, n, k) for e, n, k in GROUPED_SHAPES for t in GROUPED_ROWS}
    return sorted(found | {float32_output(p) for p in found}, key=str)