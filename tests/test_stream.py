"""The weight-streaming GEMM (cuda/csrc/gemm_stream.cu, plan.StreamParams, and its grouped build,
plan.GroupedStreamParams): its shared memory as the kernel states it, its stream-K split, the grouped build's
chunks and slots and the sign-split conversion emulated exactly on the CPU, its heuristic; on a Hopper GPU
(marker gpu) the kernel against the exact oracle (the grouped build's: tests/test_moe_kernels.py)."""
import dataclasses
import random

import numpy as np
import pytest
import torch

import mxfp4
from mxfp4 import formats, plan, testing
from mxfp4.bench.shapes import shape_set
from mxfp4.cuda import jit

from .cases import large_m_operands, partial_meets_the_bound, reads_fp16_and_float32_as_given


def stream_variants():
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    return [p for p in shipped if isinstance(p, plan.StreamParams)] + STREAM


STREAM = [plan.StreamParams(1, 8, 2, 16, 5, sign_split=True), plan.StreamParams(2, 4, 4, 16, 7, sign_split=True),
          plan.StreamParams(4, 8, 2, 16, 3), plan.StreamParams(1, 2, 1, 8, 3),
          plan.StreamParams(2, 2, 2, 8, 4, sign_split=True),
          plan.StreamParams(4, 4, 2, 16, 2), plan.StreamParams(1, 8, 2, 32, 2, sign_split=True, one_token=True),
          plan.StreamParams(1, 4, 4, 16, 5, one_token=True)]


@pytest.mark.slow  # 6-11 s on 2 cores: one NVRTC compile (PTX only) a build
def test_shared_memory_is_the_kernels():
    """The host's size of every shipped variant is the one the kernel exports (Smem::BYTES), the grouped
    build's too (its chunks' table comes after it: GroupedStreamParams.smem_bytes)."""
    variants = stream_variants()
    assert {p.mt for p in variants} >= {1, 2, 4}
    for p in variants:
        p.check()
        assert jit.exported_constant(p.source, p.defines(), "mxfp4_stream_smem_bytes") == p.smem_bytes(), p
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    grouped = [p for p in shipped if isinstance(p, plan.GroupedStreamParams)]
    assert {p.tile.mt for p in grouped} == {1, 2}
    for p in grouped:
        p.check()
        assert jit.exported_constant(p.source, p.defines(), "mxfp4_stream_smem_bytes") == p.tile.smem_bytes(), p
        assert p.smem_bytes(256) == p.tile.smem_bytes() + 4 * (3 * 256 + 1)


def grouped_rows(offsets: list[int], e: int, t: int) -> tuple[int, int]:
    """mx::grouped_rows, written again from its comment: [offsets[e-1], offsets[e]) clamped to [start, T]."""
    start = min(max(offsets[e - 1] if e else 0, 0), t)
    return start, min(max(offsets[e], start), t)


def grouped_chunks(offsets: list[int], t: int, tok: int) -> list[tuple[int, int, int, int]]:
    """The chunks mx::grouped_chunks and mx::GroupedChunks::find give, each (expert, first row, rows, slot), by
    find's binary search over the prefix of the experts' chunk counts; the slot by mxfp4_quantize_grouped's
    rule, ceil(start_e / tok) + e + j for the expert's chunk j."""
    e_count = len(offsets)
    rows = [grouped_rows(offsets, e, t) for e in range(e_count)]
    cps = [0]
    for s, end in rows:
        cps.append(cps[-1] + -(-(end - s) // tok))
    found = []
    for c in range(cps[-1]):
        lo, hi = 0, e_count - 1  # the last expert whose chunks begin at or before c
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            lo, hi = (mid, hi) if cps[mid] <= c else (lo, mid - 1)
        s, end = rows[lo]
        j = c - cps[lo]
        found.append((lo, s + j * tok, min(tok, end - s - j * tok), -(-s // tok) + lo + j))
    return found


def test_grouped_chunks_cover_each_expert_once_in_slots_that_never_meet():
    """Every expert's rows in chunks of at most tok rows, in order, once (empty experts none, one-row experts
    one, experts longer than a chunk several); no two chunks share a slot; every slot and the chunk count
    inside what GroupedStreamParams sizes the workspace and the grid for. Malformed offsets (decreasing, past
    T, negative) stay inside the workspace."""
    rng = random.Random(7)
    for tok in (8, 16, 32):
        params = plan.GroupedStreamParams(plan.StreamParams(tok // 8, 4, 4, 16, 2))
        for _ in range(400):
            e, t = rng.choice([1, 2, 5, 64, 256]), rng.choice([1, 7, 100, 333, 1024])
            counts = [0] * e
            for _ in range(t):
                counts[rng.randrange(e) if rng.random() < 0.7 else 0] += 1
            offsets = list(np.cumsum(counts))
            chunks = grouped_chunks(offsets, t, tok)
            rows = [r for ex, r0, n, _ in chunks for r in range(r0, r0 + n)]
            assert rows == list(range(t))
            assert all(1 <= n <= tok and offsets[ex] - counts[ex] <= r0 < offsets[ex] for ex, r0, n, _ in chunks)
            slots = [slot for *_, slot in chunks]
            assert len(set(slots)) == len(slots) and max(slots) < params.slots(t, e)
            assert len(chunks) <= params.chunks(t, e)
            bad = [rng.randint(-5, t + 5) for _ in range(e)]
            assert all(0 <= slot < params.slots(t, e) for *_, slot in grouped_chunks(bad, t, tok))


def test_grouped_params_size_the_call():
    """The grouped build's defines, workspace (a slot of tokens rows a chunk, then the dense call's flags and
    partials), grid (one CTA an SM, fewer where the most chunks make fewer units) and what it refuses."""
    p = plan.GroupedStreamParams(plan.stream_params(1, 8, 2, 32, sign_split=True))
    assert p.defines() == {**p.tile.defines(), "GROUPED": 1} and p.tokens == 8
    assert p.chunks(66, 2) == 2 + 8 and p.slots(66, 2) == 9 + 2
    scales, flags, part, end = p.workspace_offsets(66, 2, 2048, 132)
    assert (scales, flags) == (11 * 8 * 2048, 11 * 8 * 2048 + 11 * 8 * 64 * 4)
    assert part == flags + 768 and end == part + 132 * 8 * 128 * 4
    assert p.grid(8, 256, plan.Problem(8, 4096, 7168), 132) == 132
    assert p.grid(1, 8, plan.Problem(8, 128, 512), 132) == 1  # one chunk, one tile, 16 blocks: one unit
    with pytest.raises(ValueError, match="tile.one_token False"):
        plan.GroupedStreamParams(dataclasses.replace(p.tile, one_token=True)).check()
    assert p.fits(plan.Problem(1, 4096, 7168), 256) and not p.fits(plan.Problem(1, 4096, 7168), 20000)


def test_grouped_tile_by_the_units_a_call_gives():
    """128-row tiles where min(E, T) experts' units give every CTA 8 or more (the sweep's faster there), 64-row
    tiles for a token's few experts; chunks of 16 rows above 4 mean rows an expert; one variant (its ring cut
    for plan.GROUPED_RING_EXPERTS' table) for every E up to it, a shallower ring beyond."""
    wide, narrow = (8, 2, 32), (4, 4, 32)
    shape = lambda p: (p.tile.g, p.tile.kw, p.tile.ks)  # noqa: E731
    assert shape(plan.grouped_heuristic(8, 256, 4096, 7168)) == wide  # one token of DeepSeek-R1 gate_up
    assert shape(plan.grouped_heuristic(4, 128, 2880, 2880)) == narrow  # one token of GPT-OSS down
    assert shape(plan.grouped_heuristic(64, 128, 2880, 2880)) == wide  # 16 tokens
    assert plan.grouped_heuristic(2048, 256, 4096, 7168).tile.mt == 2  # 8 rows an expert
    assert len({plan.grouped_heuristic(4, e, 2880, 2880) for e in (8, 64, 128, 256, 1024)}) == 1
    deep = plan.grouped_heuristic(4, 1024, 2880, 2880)
    assert plan.grouped_heuristic(4, 4000, 2880, 2880).tile.stages < deep.tile.stages
    assert deep.fits(plan.Problem(8, 2880, 2880), plan.GROUPED_RING_EXPERTS)


def test_impossible_variants_do_not_compile():
    with pytest.raises(jit.CompileError, match="G must be even"):
        jit.compile_cubin("gemm_stream.cu", dict(MT=1, G=3, KW=1, KS=8, STAGES=2))
    with pytest.raises(jit.CompileError, match="KW must be a power of 2"):
        jit.compile_cubin("gemm_stream.cu", dict(MT=1, G=2, KW=3, KS=24, STAGES=2))
    with pytest.raises(jit.CompileError, match="exceeds the 227 KiB"):
        jit.compile_cubin("gemm_stream.cu", dict(MT=4, G=8, KW=2, KS=16, STAGES=6))


def split_tiles(tiles: int, chunks: int, grid: int) -> dict[int, list[int]]:
    """The kernels' split (csrc/streamk.cuh), written again from its comment, over ``chunks`` pieces a tile
    (the streaming GEMM's slices of 8 blocks, the banded GEMM's units): CTA i takes pieces [U i / grid,
    U (i + 1) / grid); a tile it holds whole it stores; the CTA holding a tile's last piece adds the partials
    of the CTAs before it that hold some of the tile (cta_of(first piece) .. itself), in CTA order. Returns,
    per tile, the pieces in the order they are added."""
    units = tiles * chunks
    ranges = [(units * i // grid, units * (i + 1) // grid) for i in range(grid)]
    last_partial = {}  # CTA -> the chunks of its last, unfinished tile
    summed = {}
    for i, (ub, ue) in enumerate(ranges):
        u = ub
        while u < ue:
            t = u // chunks
            t0, t1 = t * chunks, (t + 1) * chunks
            stop = min(ue, t1)
            mine = list(range(u - t0, stop - t0))
            if t0 >= ub and t1 <= ue:
                summed[t] = mine
            elif t1 <= ue:  # the owner: the CTAs before it that hold the tile, then itself
                first = ((t0 + 1) * grid + units - 1) // units - 1
                summed[t] = [c for j in range(first, i) for c in last_partial[j]] + mine
            else:
                last_partial[i] = mine
            u = stop
    return summed


def test_split_adds_every_chunk_of_every_tile_once():
    rng = random.Random(5)
    for _ in range(3000):
        tiles, chunks = rng.randint(1, 200), rng.randint(1, 40)
        grid = rng.randint(1, min(264, tiles * chunks))
        summed = split_tiles(tiles, chunks, grid)
        assert sorted(summed) == list(range(tiles))
        assert all(v == list(range(chunks)) for v in summed.values())  # in K order, each once


def stream_units(s_begin: int, s_end: int, spt: int, nblk: int, ks: int, sl: int) -> list[tuple[int, int, int]]:
    """gemm_stream.cu's Walk over a CTA's slices [s_begin, s_end) of ``sl`` blocks (max(8, 4 kw), or ks where
    the CTAs hold fewer than 8 units each): (tile, first block, blocks) of each unit."""
    units, s = [], s_begin
    t, o = divmod(s_begin, spt)
    left = ks // sl - o % (ks // sl)
    while s < s_end:
        n = min(left, spt - o, s_end - s)
        units.append((t, o * sl, min(n * sl, nblk - o * sl)))
        s, o, left = s + n, o + n, ks // sl
        if o == spt:
            t, o = t + 1, 0
    return units


def test_stream_units_cover_each_range_in_chunks():
    """Every block of every tile once, in K order, by units inside one chunk of ks blocks; only a range's
    first and last unit (or a tile's last chunk) short; a whole unit begins at its chunk."""
    rng = random.Random(6)
    for _ in range(2000):
        tiles, nblk, ks = rng.randint(1, 60), 2 * rng.randint(1, 150), rng.choice((8, 16, 32))
        sl = rng.choice([s for s in (8, 16, 32) if ks % s == 0])  # max(8, 4 kw)
        spt = -(-nblk // sl)
        grid = rng.randint(1, min(264, tiles * -(-nblk // ks)))
        slices, seen = tiles * spt, []
        for i in range(grid):
            units = stream_units(slices * i // grid, slices * (i + 1) // grid, spt, nblk, ks, sl)
            for j, (t, kb0, nb) in enumerate(units):
                assert 0 < nb <= ks and kb0 // ks == (kb0 + nb - 1) // ks  # inside one chunk
                assert nb == ks and kb0 % ks == 0 or j in (0, len(units) - 1) or kb0 + nb == nblk
                seen += [(t, b) for b in range(kb0, kb0 + nb)]
        assert seen == [(t, b) for t in range(tiles) for b in range(nblk)]


def prmt(a: int, b: int, s: int) -> int:
    """PTX prmt.b32 (default mode): selector nibble bits 2..0 pick a byte of (b:a), bit 3 replicates its sign."""
    src = (a | (b << 32)).to_bytes(8, "little")
    out = []
    for i in range(4):
        nib = (s >> (4 * i)) & 0xF
        byte = src[nib & 7]
        out.append((0xFF if byte & 0x80 else 0) if nib & 8 else byte)
    return int.from_bytes(bytes(out), "little")


def test_sign_split_gives_the_signed_codes():
    """e2m1x4_positive(c) - e2m1x4_positive(c ^ 0x8888), byte by byte: twice the e2m1 values, every code."""
    doubled = [int(2 * v) for v in formats.E2M1_VALUES]
    for c in range(1 << 16):
        pos = prmt(0x03020100, 0x0C080604, c).to_bytes(4, "little")
        neg = prmt(0x03020100, 0x0C080604, c ^ 0x8888).to_bytes(4, "little")
        assert [p - q for p, q in zip(pos, neg)] == [doubled[(c >> (4 * i)) & 0xF] for i in range(4)]


def test_fold_start_gives_the_scaled_sum():
    """mx::fold_start: an int32 sum s added to the start's bits, the float difference with the start is
    s times the half-scale 2**(e - 128), exactly, for every scale byte e <= 232 and |s| < 2**22."""
    sums = np.array([-(2**22) + 1, -4608, -13, -1, 0, 1, 7, 4608, 2**21 + 3, 2**22 - 1], dtype=np.int64)
    for e in range(233):
        start = ((e + 22) << 23) | 0x400000
        moved = (start + sums).astype(np.uint32).view(np.float32)
        got = moved - np.array([start], dtype=np.uint32).view(np.float32)
        assert [float(x) for x in got] == [float(s) * 2.0 ** (e - 128) for s in sums], e


@pytest.mark.parametrize("m, n, k", [(1, 57344, 8192), (16, 2112, 7168), (32, 2880, 4096), (7, 16, 64),
                                     (1, 2304, 16384), (2, 8192, 8192)])
def test_heuristic(m, n, k):
    p = plan.stream_heuristic(plan.Problem(m, n, k))
    p.check()
    assert p.fits(plan.Problem(m, n, k)) and p.tokens >= m and p.sign_split == (m <= 16)
    assert p.one_token == (m == 1) and not p.fits(plan.Problem(m + 1, n, k)) if m == 1 else not p.one_token
    assert 1 <= p.grid(plan.Problem(m, n, k), 132) <= p.units(plan.Problem(m, n, k))
    assert plan.stream_heuristic(plan.Problem(33, n, k)) is None


def test_bad_params_name_the_rule():
    for bad, rule in ((plan.StreamParams(3), "mt must be"), (plan.StreamParams(g=3), "g must be even"),
                      (plan.StreamParams(ks=12), "ks must be"),
                      (plan.StreamParams(kw=3, ks=24), "kw must be a power of 2"),
                      (plan.StreamParams(2, 8, 2, 16, 8), "shared memory"),
                      (plan.StreamParams(2, one_token=True), "one_token needs mt 1")):
        with pytest.raises(ValueError, match=rule):
            bad.check()


# ---- on a Hopper GPU ----------------------------------------------------------------------------

def _meets_the_contract(a, w, params, min_identical):
    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    out = mxfp4.gemm_a4w4(a.cuda(), wd, params=params)
    report = testing.check_gemm(out.cpu(), a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert report.identical_fraction >= min_identical, report
    again = mxfp4.gemm_a4w4(a.cuda(), wd, params=params)
    assert torch.equal(out.view(torch.int16), again.view(torch.int16))


@pytest.mark.gpu
@pytest.mark.parametrize("params", STREAM,
                         ids=lambda p: f"mt{p.mt}g{p.g}kw{p.kw}ks{p.ks}st{p.stages}{'s' if p.sign_split else ''}")
@pytest.mark.parametrize("m, n, k, kind", [(1, 2112, 2880, "randn"), (7, 160, 768, "spread"), (16, 2112, 2880, "mixed"),
                                           (32, 80, 640, "randn"), (5, 4096, 7168, "mixed"), (3, 16, 64, "randn"),
                                           (13, 48, 96, "randn"), (8, 8192, 4160, "randn")])
def test_kernel_meets_the_contract(params, m, n, k, kind):
    if not params.fits(plan.Problem(m, n, k)):
        pytest.skip(f"{params} holds {params.tokens} rows, not {m}")
    a, w = large_m_operands(m, n, k, kind)
    _meets_the_contract(a, w, params, 0.999 if kind == "randn" or (kind == "mixed" and m > 7) else 0.98)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fp16_and_float32_activations_are_read_as_they_are(dtype):
    reads_fp16_and_float32_as_given(plan.stream_heuristic(plan.Problem(16, 2112, 2880)), dtype)


@pytest.mark.gpu
def test_float32_partial():
    partial_meets_the_bound(16, 2112, 2880, plan.StreamParams)
