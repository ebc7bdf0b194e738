"""The eighth session's register-operand experiment (tools/gluon_rs.py, tools/gluon_rs_kernel.py;
Gluon, sm_90 only; not library code, as it was slower than int8_fused on every shape tuned).

CPU: the weight's fragment order and shift plane, the config rules, and the clear refusal where
the kernel cannot run (Gluon has no CPU interpreter). GPU (marker ``gpu``): odd shapes, rows that
do not fold, special values and determinism, against the exact oracle.
"""
import sys
from pathlib import Path

import pytest
import torch

import mxfp4
from mxfp4 import Layout, testing
from mxfp4.formats import unpack_codes

pytest.importorskip("triton.experimental.gluon")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
gluon_rs = pytest.importorskip("gluon_rs")
RSConfig = gluon_rs.RSConfig

RS = gluon_rs.available()
needs_rs = pytest.mark.skipif(not RS, reason="needs an sm_90 GPU (the kernel is Gluon code)")


@pytest.mark.parametrize("n, k", [(64, 256), (48, 512)])
def test_rs_codes_put_each_lane_word_in_the_wgmma_fragment_order(n, k):
    """Word q (q = lane % 4) of each block and row holds the codes of K offsets 4q .. 4q+3 and
    16+4q .. 16+4q+3 of that block, in the unpack's order; read back in that order the words
    give the fold's codes exactly."""
    w = mxfp4.quantize(torch.randn(n, k, generator=torch.Generator().manual_seed(n + k)).to(torch.bfloat16))
    codes, shift, _ = gluon_rs.rs_fold(w, k // 32)
    words = gluon_rs.unpack_words(codes)  # block b, word q, code i at 32 b + 8 q + i
    natural = torch.empty_like(words)
    for q in range(4):
        for i in range(8):
            natural[:, 16 * (i // 4) + 4 * q + i % 4::32] = words[:, 8 * q + i::32]
    assert torch.equal(natural, unpack_codes(w.data))
    assert shift.shape == (n, k // 32) and int(shift.max()) <= 3
    c = torch.arange(16, dtype=torch.uint8).repeat(2, 4)
    assert torch.equal(gluon_rs.unpack_words(gluon_rs.pack_words(c)), c)


def test_shift_plane_gives_each_k_step_its_own_16_byte_tile():
    shift = torch.arange(3 * 12, dtype=torch.uint8).view(3, 12)  # 12 blocks
    plane = gluon_rs.shift_plane(shift, 8)  # 8 blocks a step: 2 steps, the second one half full
    assert plane.shape == (3, 32)
    assert torch.equal(plane[:, :8], shift[:, :8]) and not plane[:, 8:16].any()
    assert torch.equal(plane[:, 16:20], shift[:, 8:]) and not plane[:, 20:].any()


@pytest.mark.parametrize("fields, rule", [
    (dict(blocks_per_step=2), "blocks_per_step must be 4, 8 or 16"),
    (dict(block_a=128), "block_a must be 16, 32 or 64"),
    (dict(stages=1), "stages >= 2"),
])
def test_rs_config_rules_name_the_field(fields, rule):
    with pytest.raises(ValueError, match=rule):
        RSConfig(**fields)


def test_rs_check_bounds_the_segment_and_shared_memory():
    cfg = RSConfig(16, 14, 4, 8)
    # K = 7168 in 14 splits of 16 blocks: 2 steps of 16 x 256 bytes of A, 4 slots of 64 x 128 + 64 x 16
    assert gluon_rs.segments(7168, cfg) == (16, 14)
    assert gluon_rs.steps(7168, cfg) == 2
    assert gluon_rs.smem(7168, cfg) == 2 * 16 * 256 + 4 * (64 * 128 + 64 * 16 + 8) + 16 * 32
    gluon_rs.check(7168, cfg)
    with pytest.raises(ValueError, match="more than 4 steps or 8192 elements: use more splits"):
        gluon_rs.check(7168, RSConfig(16, 4, 4, 8))  # 7 -> 8 steps
    with pytest.raises(ValueError, match="more than 4 steps or 8192 elements"):
        gluon_rs.check(512, RSConfig(64, 1, 4, 8))  # 64 x 512 elements


@pytest.mark.skipif(RS, reason="checks the refusal where the kernel cannot run")
def test_rs_refuses_clearly_where_it_cannot_run():
    a = torch.randn(4, 512).to(torch.bfloat16)
    w = mxfp4.quantize(torch.randn(64, 512).to(torch.bfloat16))
    with pytest.raises(RuntimeError, match="register-operand kernel is Gluon code"):
        gluon_rs.launch_rs(a, w, torch.empty(4, 64, dtype=torch.bfloat16), RSConfig())


def _spread_rows(x: torch.Tensor, lo: int, hi: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    j = torch.randint(lo, hi + 1, (x.shape[0], x.shape[1] // 32), generator=g).float()
    return (x.float().cpu() * torch.pow(2.0, j).repeat_interleave(32, 1)).to(x.dtype).to(x.device)


RS_CONFIGS = [RSConfig(16, 1, 3, 16), RSConfig(16, 4, 4, 4), RSConfig(16, 14, 4, 16), RSConfig(32, 2, 3, 8),
              RSConfig(64, 4, 2, 4)]


def _fits(k: int, cfg: RSConfig) -> bool:
    try:
        gluon_rs.check(k, cfg)
    except ValueError:
        return False
    return True


@pytest.mark.gpu
@needs_rs
@pytest.mark.parametrize("m", [1, 7, 16, 33, 64])
@pytest.mark.parametrize("n, k", [(2880, 512), (2112, 7168), (3072, 1536), (2152, 2048)])
def test_rs_on_gpu(m, n, k):
    """Odd M, N not a multiple of 64 (2152, plain layout), every K of the task; every 7th row
    spread over 2**-9 .. 2**9 block to block (those tiles go block by block); the output starts
    as NaN, so an element left unwritten fails the check."""
    g = torch.Generator().manual_seed(m + n + k)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    a[::7] = _spread_rows(a[::7], -9, 9, 8)
    w = mxfp4.quantize(torch.randn(n, k, generator=g).to(torch.bfloat16).cuda())
    w = w.to_layout(Layout.AITER_SHUFFLED if n % 16 == 0 else Layout.PLAIN)
    configs = [cfg for cfg in RS_CONFIGS if _fits(k, cfg)]
    assert configs
    for cfg in configs:
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gluon_rs.launch_rs(a, w, out, cfg)
        assert testing.check_gemm(out, a, w).passed, cfg


@pytest.mark.gpu
@needs_rs
def test_rs_special_values_and_determinism_on_gpu():
    """NaN / Inf rows (their output rows NaN), zero, subnormal and saturating blocks; 100 calls
    with split-K give the same bits."""
    from test_int8 import special_rows

    a = special_rows(16, 7168, 5).cuda()
    w = mxfp4.quantize(torch.randn(2112, 7168, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16).cuda())
    cfg = RSConfig(16, 14, 4, 16)

    def call() -> torch.Tensor:
        out = torch.empty(16, 2112, dtype=torch.bfloat16, device="cuda")
        gluon_rs.launch_rs(a, w, out, cfg)
        return out

    first = call()
    assert testing.check_gemm(first, a, w).passed
    assert torch.isnan(first[0]).all() and torch.isnan(first[1]).all()
    for _ in range(100):  # bits compared (NaN != NaN)
        assert torch.equal(call().view(torch.int16), first.view(torch.int16))
