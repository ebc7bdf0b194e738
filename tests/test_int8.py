"""The int8 fold (mxfp4.fold) and the large-M int8 kernel, against the exact oracle.

CPU: the fold in torch, the Triton fold kernel and the GEMM under TRITON_INTERPRET=1 on small
shapes. GPU (marker ``gpu``): the issue's prefill shapes, on randn data (every segment folds)
and on rows scaled 2**-20 .. 2**20 block to block (segments that do not fold).
"""
import dataclasses

import pytest
import torch

import mxfp4
from mxfp4 import KernelConfig, Layout, ScaleRule, fold, launch, ops, residency, testing

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def spread_rows(x: torch.Tensor, lo: int, hi: int, seed: int) -> torch.Tensor:
    """x with each 32-block scaled by a random 2**j, j in [lo, hi]."""
    g = torch.Generator().manual_seed(seed)
    j = torch.randint(lo, hi + 1, (x.shape[0], x.shape[1] // 32), generator=g).float()
    return (x.float().cpu() * torch.pow(2.0, j).repeat_interleave(32, 1)).to(x.dtype).to(x.device)


def special_rows(m: int, k: int, seed: int) -> torch.Tensor:
    """randn rows with NaN, Inf, zero, subnormal, huge (saturating) and tiny blocks mixed in."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    a[0, 3] = float("nan")
    a[1 % m, 40 % k] = float("inf")
    a[2 % m, :32] = 0.0
    a[2 % m, 32:64] = -0.0
    a[3 % m, 64:96] *= 2.0 ** -130  # bf16 subnormals
    a[4 % m, 96:128] = 3.0e38  # rounds to a saturating block
    a[5 % m] *= 2.0 ** 100
    return a.to(torch.bfloat16)


# ---- the fold in torch -------------------------------------------------------------------------

@pytest.mark.parametrize("seg", [1, 3, 8, 64])
def test_fold_keeps_the_values(seg):
    a = torch.cat([special_rows(6, 256, 1), spread_rows(torch.randn(6, 256), -6, 6, 2).to(torch.bfloat16)])
    t = mxfp4.quantize(a)
    f = fold.fold_tensor(t, seg)
    values = mxfp4.dequantize(t, torch.float64)
    got = fold.unfold(f)
    assert torch.equal(torch.isnan(got), torch.isnan(values))
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(values))
    assert int(f.q.abs().max()) <= 96


def test_fold_flag_follows_the_spread_of_nonzero_blocks():
    # one row per case, 4 blocks, one segment: block exponents set through the block amax
    base = torch.full((32,), 1.0)
    cases = {  # block multipliers -> folded?
        (1, 2, 4, 8): True,          # spread 3
        (1, 2, 4, 16): False,        # spread 4
        (1, 0, 0, 8): True,          # zero blocks do not count
        (1, 2 ** -40, 1, 1): False,  # a tiny (nonzero-coded) block does
        (0, 0, 0, 0): True,
    }
    a = torch.stack([torch.cat([base * s for s in mult]) for mult in cases]).to(torch.bfloat16)
    f = fold.fold_tensor(mxfp4.quantize(a), 4)
    assert f.folded[:, 0].tolist() == [int(v) for v in cases.values()]


@pytest.mark.parametrize("seg, step", [(1, 2), (3, 4), (64, 8), (8, 16)])
def test_packed_fold_holds_the_fold(seg, step):
    """The packed form unpacks to the int8 fold bit for bit (every code, shifts 0 .. 3, rows that
    do not fold, NaN blocks), at about half its bytes."""
    b = special_rows(8, 256, 2)
    b[1:6:2] = spread_rows(b[1:6:2], -4, 4, 3)
    b[6] = (b[6].float() * 2.0 ** -(torch.arange(256) // 32 % 4)).to(torch.bfloat16)  # shifts 3, 2, 1, 0 in turn
    w = mxfp4.quantize(b.to(DEV))
    p = fold.pack_tensor(w, seg, step)
    assert p.codes.shape == (8, 128) and p.shift.shape == (8, -(-8 // step)) and p.shift.dtype == torch.int32
    shifts = set(fold.unpack_shifts(p.shift, 8, step).unique().tolist())
    assert shifts == ({0, 3} if seg == 1 else {0, 1, 2, 3})  # a one-block segment's R is its own e
    assert not fold.differing_arrays(fold.unpack_fold(p), fold.fold_tensor(w, seg))


@pytest.mark.parametrize("k", [32, 64, 352])
def test_packed_codes_put_both_blocks_of_a_run_in_each_word(k):
    """Word w of a run of 64 codes holds codes 4w .. 4w+3 in its low 16 bits and 32+4w ..
    32+4w+3 in its high 16, four bits each from the bottom (a last half run padded with zero
    codes); the shift words hold block j of a step at bit 2j."""
    g = torch.Generator().manual_seed(k)
    codes = torch.randint(0, 16, (3, k), generator=g, dtype=torch.uint8)
    packed = fold.pack_codes(codes)
    assert packed.shape == (3, 32 * -(-k // 64))
    words = packed.view(3, -1, 4).to(torch.int64)
    words = words[..., 0] | words[..., 1] << 8 | words[..., 2] << 16 | words[..., 3] << 24
    padded = torch.nn.functional.pad(codes, (0, -k % 64)).to(torch.int64)
    for i in range(words.shape[1]):
        run, w = divmod(i, 8)
        expect = sum(padded[:, 64 * run + 32 * half + 4 * w + j] << (16 * half + 4 * j)
                     for half in (0, 1) for j in range(4))
        assert torch.equal(words[:, i], expect)
    assert torch.equal(fold.unpack_codes(packed, k), codes)
    shift = torch.randint(0, 4, (3, 11), generator=g, dtype=torch.uint8)
    packed_shift = fold.pack_shifts(shift, 4)
    assert packed_shift.shape == (3, 3)
    assert (packed_shift[:, 1].to(torch.int64) >> 6 & 3).tolist() == shift[:, 7].tolist()
    assert torch.equal(fold.unpack_shifts(packed_shift, 11, 4), shift)
    with pytest.raises(ValueError, match="step_blocks in"):
        fold.pack_shifts(shift, 3)


def test_folded_weight_is_cached_and_follows_in_place_changes():
    w = mxfp4.quantize(torch.randn(32, 128).to(torch.bfloat16))
    first = fold.folded_weight(w, 4)
    assert fold.folded_weight(w, 4) is first
    w.data.bitwise_xor_(0x11)
    again = fold.folded_weight(w, 4)
    assert again is not first and not torch.equal(again.q, first.q)


def test_int8_config_rules():
    assert KernelConfig(64, 128, 1, 4, 3, 4, "int8", 8).fold_blocks == 8
    with pytest.raises(ValueError, match="fold_blocks"):
        KernelConfig(64, 128, 1, 4, 3, 4, "int8", 6)
    with pytest.raises(ValueError, match="split_k > 1"):
        KernelConfig(64, 128, 2, 4, 3, 4, "int8", 8)
    with pytest.raises(ValueError, match="fold_blocks"):
        KernelConfig(64, 128, fold_blocks=8)


# ---- the Triton fold kernel (interpreter on CPU) -------------------------------------------------

@pytest.mark.parametrize("m, k, seg", [(1, 64, 2), (7, 320, 4), (33, 256, 8), (6, 512, 16)])
@pytest.mark.parametrize("rule", [ScaleRule.AITER, ScaleRule.FLOOR])
@pytest.mark.parametrize("elems", [launch.FOLD_ELEMS, 64])
def test_fold_kernel_matches_the_torch_fold(m, k, seg, rule, elems, monkeypatch):
    """Segments in one load (facts and fold from the same registers) and, with 64 elements per
    load, in several (two passes over A) where the segment is longer than 2 blocks."""
    monkeypatch.setattr(launch, "FOLD_ELEMS", elems)
    a = torch.cat([special_rows(6, k, m), spread_rows(torch.randn(m, k), -5, 5, k).to(torch.bfloat16)]).to(DEV)
    got = launch.fold_a(a, seg, rule)
    want = fold.fold_tensor(mxfp4.quantize(a, rule), seg)
    assert not fold.differing_arrays(got, want)


# ---- the GEMMs: two launches (int8) and one (int8_fused, int8_meet); interpreter on CPU --------

SMALL = [  # m, n, k, data seed, config: the two-launch int8 path, then the one-launch kernels
    (7, 48, 256, 336, KernelConfig(16, 16, 1, 4, 2, 2, "int8")),
    (33, 40, 320, 1320, KernelConfig(16, 32, 1, 4, 2, 2, "int8", 4)),
    (20, 32, 512, 640, KernelConfig(32, 16, 1, 4, 2, 4, "int8", 8)),
    (20, 32, 512, 640, KernelConfig(32, 16, 3, 4, 2, 4, "int8")),   # split-K: 2 segments of 8 blocks
    (33, 40, 320, 1320, KernelConfig(16, 32, 2, 4, 2, 2, "int8")),   # split-K: 2 segments of 6 blocks
    (4, 48, 256, 448, KernelConfig(16, 16, 1, 4, 1, 8, "int8_fused")),     # M < 16: rows repeated, one step
    (1, 40, 512, 552, KernelConfig(16, 32, 1, 4, 1, 16, "int8_fused")),    # one row; N past the tile
    (7, 64, 512, 960, KernelConfig(16, 32, 2, 4, 1, 8, "int8_fused")),     # split-K, one step per split
    (20, 32, 512, 1152, KernelConfig(16, 16, 3, 4, 2, 2, "int8_fused")),    # split-K, several steps per split
    (7, 48, 320, 962, KernelConfig(16, 16, 10, 4, 1, 1, "int8_fused")),     # split-K 10: partials summed in 2 groups
    (33, 40, 320, 1640, KernelConfig(32, 32, 1, 4, 2, 2, "int8_fused")),    # M and N past the tiles, odd steps
    (20, 40, 512, 1153, KernelConfig(8, 32, 1, 4, 1, 16, "int8_fused")),    # 8 A rows per program, twice in the dot
    (7, 48, 320, 964, KernelConfig(2, 16, 2, 4, 2, 2, "int8_fused")),       # 2 rows per program, split-K, K loop
    (20, 32, 512, 1154, KernelConfig(16, 16, 3, 4, 2, 2, "int8_fused", w_tma=True)),  # the weight by TMA: split-K
    (33, 40, 320, 1642, KernelConfig(32, 32, 1, 4, 2, 2, "int8_fused", w_tma=True)),  # past M, N and K's last step
    (1, 40, 512, 553, KernelConfig(16, 32, 1, 4, 1, 16, "int8_fused", w_tma=True)),   # one step
    (7, 64, 512, 965, KernelConfig(16, 32, 2, 4, 2, 8, "int8_fused", w_tma=True)),    # one step per split, pipelined
    (20, 40, 512, 1156, KernelConfig(8, 32, 1, 4, 2, 16, "int8_fused", w_tma=True)),  # 8 rows twice, one step
    (7, 48, 256, 337, KernelConfig(16, 16, 1, 4, 2, 2, "int8_meet")),       # one launch, persistent: whole K
    (33, 40, 320, 1321, KernelConfig(16, 32, 1, 4, 2, 2, "int8_meet", 4)),  # segments in a loop
    (20, 32, 512, 641, KernelConfig(32, 16, 3, 4, 2, 4, "int8_meet")),      # split-K
    # the packed weight (codes and block shifts unpacked in the kernel)
    (33, 40, 320, 1322, KernelConfig(16, 32, 1, 4, 2, 2, "int8", 4, packed=True)),   # segments, steps of one run
    (20, 32, 512, 642, KernelConfig(32, 16, 3, 4, 2, 4, "int8", packed=True)),       # split-K
    (33, 40, 352, 643, KernelConfig(16, 32, 1, 4, 2, 4, "int8", packed=True)),       # K ends in half a run
    (20, 64, 768, 644, KernelConfig(16, 64, 1, 4, 2, 8, "int8", packed=True)),       # steps of four runs
    (7, 48, 256, 338, KernelConfig(16, 16, 1, 4, 2, 2, "int8_meet", packed=True)),
    (7, 48, 320, 963, KernelConfig(16, 16, 5, 4, 1, 2, "int8_fused", packed=True)),
    (33, 40, 320, 1641, KernelConfig(32, 32, 1, 4, 2, 2, "int8_fused", packed=True)),
    (7, 48, 576, 966, KernelConfig(16, 16, 1, 4, 1, 16, "int8_fused", packed=True)),  # steps of 8 runs, K past a step
]


@pytest.mark.parametrize("m, n, k, seed, cfg", SMALL)
@pytest.mark.parametrize("data", ["randn", "spread", "mixed", "special"])
def test_int8_gemm_small(m, n, k, seed, cfg, data):
    """Both int8 paths against the oracle, A's fold bit for bit, the output poisoned first (the
    debug path), on randn, spread, mixed and special data."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    if data == "spread":  # every segment spreads: all block by block
        a = spread_rows(a, -20, 20, 3)
    elif data == "mixed":  # some A rows and some W rows spread: tiles mix both paths
        a[::3] = spread_rows(a[::3], -9, 9, 4)
        b[1::5] = spread_rows(b[1::5], -9, 9, 5)
    elif data == "special":
        a[:6] = special_rows(6, k, 6)[:m]
    w = mxfp4.quantize(b.to(DEV)).to_layout(Layout.AITER_SHUFFLED if n % 16 == 0 else Layout.PLAIN)
    a = a.to(DEV)
    out, folded_a = ops.gemm_a4w4_debug(a, w, cfg)
    assert not fold.differing_arrays(folded_a, fold.fold_tensor(mxfp4.quantize(a), folded_a.seg_blocks))
    report = testing.check_gemm(out, a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    if data != "special":  # few, huge-magnitude rows there: the 99.9 % rule is about one element
        assert report.passed, report


@pytest.mark.parametrize("wide, segment_loop", [(0, 1), (8192, 0), (8192, 1)])
def test_fused_facts_in_one_load_or_a_loop(wide, segment_loop, monkeypatch):
    """The fold facts from one load of all of a segment and every step in one loop (ALL), from
    one wide load past the first step (REST), or from a loop of step loads (segments too long
    for one load): the same output, A's fold bit for bit, on rows that spread past the fold
    (block by block) and rows that fold."""
    monkeypatch.setattr(launch, "WIDE_FACTS", wide)
    monkeypatch.setattr(launch, "FUSED_SEGMENT_LOOP", segment_loop)
    g = torch.Generator().manual_seed(1153)
    a = torch.randn(20, 512, generator=g).to(torch.bfloat16)
    a[::4] = spread_rows(a[::4], -9, 9, 4)
    w = mxfp4.quantize(torch.randn(32, 512, generator=g).to(torch.bfloat16).to(DEV))
    out, folded_a = ops.gemm_a4w4_debug(a.to(DEV), w, KernelConfig(16, 16, 3, 4, 2, 2, "int8_fused"))
    assert not fold.differing_arrays(folded_a, fold.fold_tensor(mxfp4.quantize(a.to(DEV)), folded_a.seg_blocks))
    report = testing.check_gemm(out, a.to(DEV), w)
    assert report.passed, report


def test_fused_grid_on_one_axis_gives_the_same_bits(monkeypatch):
    """The one-launch kernel's grid is (N tiles, M tiles, segments); one axis divided in the
    kernel remains for grids past 65535 M tiles or segments: both give the same output bits."""
    g = torch.Generator().manual_seed(1155)
    a = torch.randn(20, 512, generator=g).to(torch.bfloat16).to(DEV)
    w = mxfp4.quantize(torch.randn(80, 512, generator=g).to(torch.bfloat16).to(DEV))
    cfg = KernelConfig(8, 16, 3, 4, 2, 2, "int8_fused")  # 5 N tiles, 3 M tiles, 3 segments
    outs = []
    for grid3 in (1, 0):
        monkeypatch.setattr(launch, "FUSED_GRID3", grid3)
        outs.append(ops.gemm_a4w4_debug(a, w, cfg)[0])
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
    assert testing.check_gemm(outs[0], a, w).passed


def test_fused_config_rules():
    assert KernelConfig(16, 32, 1, 4, 1, 16, "int8_fused").blocks_per_step == 16
    with pytest.raises(ValueError, match="blocks_per_step"):
        KernelConfig(16, 32, 1, 4, 1, 32, "int8_fused")
    with pytest.raises(ValueError, match="fold_blocks"):
        KernelConfig(16, 32, 1, 4, 1, 4, "int8_fused", 8)
    assert KernelConfig(8, 32, 1, 4, 1, 16, "int8_fused").block_m == 8  # fewer A rows than the dot's 16
    with pytest.raises(ValueError, match="block_m must be a power of two >= 1 for the int8_fused kernel"):
        KernelConfig(12, 32, 1, 4, 1, 16, "int8_fused")
    with pytest.raises(ValueError, match="block_m must be a power of two >= 16, got 8"):
        KernelConfig(8, 32, 1, 4, 2, 4, "int8")
    assert KernelConfig(16, 128, 4, 4, 3, 8, "int8_fused", w_tma=True).w_tma
    with pytest.raises(ValueError, match="w_tma applies to the int8_fused kernel's int8 weight only"):
        KernelConfig(64, 64, 1, 4, 3, 8, "int8_meet", w_tma=True)
    with pytest.raises(ValueError, match="w_tma applies to the int8_fused kernel's int8 weight only, got kernel "
                                         "'int8_fused' with packed"):
        KernelConfig(16, 128, 4, 4, 3, 8, "int8_fused", packed=True, w_tma=True)
    with pytest.raises(ValueError, match="w_tma must be a bool"):
        KernelConfig(16, 128, 4, 4, 3, 8, "int8_fused", w_tma=1)


# ---- GPU at prefill shapes -------------------------------------------------------------------

@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m", [1024, 4096, 8192])
@pytest.mark.parametrize("n, k", [(7168, 2048), (8192, 7168)])
@pytest.mark.parametrize("cfg", [KernelConfig(128, 128, 1, 8, 3, 4, "int8"),
                                 KernelConfig(64, 256, 1, 8, 3, 4, "int8", 8)])
def test_int8_large_on_gpu(m, n, k, cfg):
    g = torch.Generator().manual_seed(m + n)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()).to_layout(Layout.AITER_SHUFFLED)
    rows = testing.sample_rows(m, limit=0)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    launch.launch_a4w4(a, w, out, cfg)
    assert testing.check_gemm(out, a, w, rows).passed
    if m == 1024:  # rows scaled 2**-20 .. 2**20 block to block: the block-by-block path
        a = spread_rows(a, -20, 20, 7)
        out.fill_(float("nan"))
        launch.launch_a4w4(a, w, out, cfg)
        assert testing.check_gemm(out, a, w, rows).passed


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m", [64, 100, 333, 1024])
@pytest.mark.parametrize("n, k", [(2112, 7168), (3072, 1536), (200 * 16 + 16, 2048), (2880, 2880)])
def test_int8_odd_shapes_on_gpu(m, n, k):
    g = torch.Generator().manual_seed(m + k)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    a[::7] = spread_rows(a[::7], -9, 9, 8)
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()).to_layout(Layout.AITER_SHUFFLED)
    for cfg in (KernelConfig(128, 128, 1, 8, 3, 8, "int8"), KernelConfig(64, 128, 1, 4, 3, 4, "int8", 8),
                KernelConfig(64, 128, 3, 4, 3, 4, "int8"), KernelConfig(64, 128, 1, 4, 4, 4, "int8_meet"),
                KernelConfig(64, 128, 3, 4, 3, 4, "int8_meet"), KernelConfig(64, 256, 1, 8, 3, 4, "int8_meet", 8),
                KernelConfig(64, 64, 1, 4, 4, 8, "int8_meet", packed=True),
                KernelConfig(64, 64, 1, 4, 3, 8, "int8_meet"),  # two programs per SM where tiles > SMs
                KernelConfig(64, 128, 3, 4, 3, 4, "int8", packed=True),
                KernelConfig(64, 32, 1, 4, 4, 8, "int8"), KernelConfig(64, 32, 1, 4, 4, 8, "int8_meet")):
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        launch.launch_a4w4(a, w, out, cfg)
        assert testing.check_gemm(out, a, w).passed, cfg
    got = launch.fold_a(a, 8, w.scale_rule)
    want = fold.fold_tensor(mxfp4.quantize(a), 8)
    assert not fold.differing_arrays(got, want)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("spread", [False, True])
def test_meet_two_programs_per_sm_on_gpu(spread):
    """int8_meet on 64 x 64 tiles in 3 stages at 256x3072x1536: 192 work items, more than the
    SMs, and two programs fit on an SM, so the grid holds two per SM (the meeting needs them
    all resident). Exact (with spread rows: tiles that go block by block), bitwise equal to the
    two-launch int8 path on the same tiles, and the same over 20 calls."""
    m, n, k = 256, 3072, 1536
    g = torch.Generator().manual_seed(2561)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    if spread:
        a[::5] = spread_rows(a[::5], -9, 9, 6)
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()).to_layout(Layout.AITER_SHUFFLED)
    cfg = KernelConfig(64, 64, 1, 4, 3, 8, "int8_meet")
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    launch.launch_a4w4(a, w, out, cfg)
    assert any(key[0] == cfg and per_sm >= 2 for key, per_sm in residency._RESIDENT.items())
    assert testing.check_gemm(out, a, w).passed
    two = torch.full_like(out, float("nan"))
    launch.launch_a4w4(a, w, two, dataclasses.replace(cfg, kernel="int8"))
    assert torch.equal(out, two)
    first = out.clone()
    for _ in range(20):
        launch.launch_a4w4(a, w, out, cfg)
        assert torch.equal(out, first)


def test_block_by_block_path_in_column_pieces(monkeypatch):
    """With the fold over all of K a tile that does not fold goes block by block in column
    pieces (INT8_PIECE_N): two pieces here, one of them past N."""
    monkeypatch.setattr(launch, "INT8_PIECE_N", 16)
    g = torch.Generator().manual_seed(9)  # not the global generator: the data must not depend on test order
    a = spread_rows(torch.randn(9, 128, generator=g), -20, 20, 9).to(torch.bfloat16).to(DEV)
    w = mxfp4.quantize(torch.randn(24, 128, generator=g).to(torch.bfloat16).to(DEV))
    out = torch.full((9, 24), float("nan"), dtype=torch.bfloat16, device=DEV)
    launch.launch_a4w4(a, w, out, KernelConfig(16, 32, 1, 4, 2, 2, "int8"))
    assert testing.check_gemm(out, a, w).passed


def test_heuristic_routes_by_m_and_runs():
    from mxfp4.tuning import heuristic_config

    assert heuristic_config(4, 2880, 512) == KernelConfig(16, 32, 1, 4, 1, 16, "int8_fused")  # the tuned winner
    assert heuristic_config(8, 2112, 7168).kernel == "int8_fused"
    assert heuristic_config(1, 2112, 7168).split_k == 12  # 17 tiles: split-K fills the GPU
    assert heuristic_config(33, 2112, 7168).kernel == "int8"
    assert heuristic_config(300, 2112, 7168).kernel == "int8"
    assert heuristic_config(4096, 7168, 7168) == KernelConfig(128, 256, 1, 8, 4, 4, "int8")
    assert heuristic_config(64, 2112, 7168).split_k == 2  # 17 tiles, long K: split-K
    assert heuristic_config(64, 7168, 2048) == KernelConfig(64, 64, 1, 4, 4, 8, "int8")  # the tuned tile
    assert heuristic_config(256, 3072, 1536) == KernelConfig(64, 128, 1, 4, 4, 8, "int8")
    assert heuristic_config(64, 7168, 2048, kernel="int8_meet").kernel == "int8_meet"
    assert heuristic_config(100, 7168, 2048, kernel="persistent").kernel == "persistent"
    a = torch.randn(300, 256).to(torch.bfloat16).to(DEV)
    w = mxfp4.quantize(torch.randn(48, 256).to(torch.bfloat16).to(DEV))
    for rows, kernel, asked in ((300, "int8", "auto"), (70, "int8", "auto"), (70, "int8_meet", "int8_meet"),
                                (5, "int8_fused", "auto")):
        cfg = heuristic_config(rows, 48, 256, kernel=asked)
        assert cfg.kernel == kernel
        out = torch.full((rows, 48), float("nan"), dtype=torch.bfloat16, device=DEV)
        launch.launch_a4w4(a[:rows], w, out, cfg)
        assert testing.check_gemm(out, a[:rows], w).passed


def test_split_k_beyond_the_counter_is_refused():
    """A tile's split-K counter holds its arrivals in 16 bits (the bit above is the shared sum's
    sense): more splits would wrap it, so the launcher refuses them, naming the argument."""
    with pytest.raises(ValueError, match="split_k: at most 65535"):
        launch._split_k_buffers(torch.device("cpu"), 1, 1 << 16, 16, torch.empty(0))
    cnt, part = launch._split_k_buffers(torch.device("cpu"), 2, (1 << 16) - 1, 16, torch.empty(0))
    assert part.numel() == 2 * ((1 << 16) - 1) * 16


def test_differing_arrays_names_what_differs():
    f = fold.fold_tensor(mxfp4.quantize(special_rows(6, 128, 1)), 2)
    assert fold.differing_arrays(f, f) == []  # NaN factors compare by their bits
    g = fold.Folded(f.q.clone(), f.block_scale, f.seg_scale, f.folded, f.seg_blocks)
    g.q[0, 0] += 1
    assert fold.differing_arrays(f, g) == ["q"]
