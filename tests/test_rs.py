"""The register-operand int8 kernel (mxfp4.kernels.rs, Gluon, sm_90 only) and its weight form.

CPU: the weight's fragment order and shift plane (mxfp4.fold.rs_codes / shift_plane), the
config rules, and the clear refusal where the kernel cannot run (Gluon has no CPU interpreter).
GPU (marker ``gpu``): odd shapes, rows that do not fold, special values and determinism, against
the exact oracle.
"""
import pytest
import torch

import mxfp4
from mxfp4 import KernelConfig, Layout, fold, launch, testing
from mxfp4.fold import folded_weight, rs_codes, shift_plane, unpack_codes

CUDA = torch.cuda.is_available()
RS = launch.rs_available()
needs_rs = pytest.mark.skipif(not RS, reason="needs an sm_90 GPU (the kernel is Gluon code)")


@pytest.mark.parametrize("n, k", [(64, 256), (48, 512)])
def test_rs_codes_put_each_lane_word_in_the_wgmma_fragment_order(n, k):
    """Word q (q = lane % 4) of each block and row holds the codes of K offsets 4q .. 4q+3 and
    16+4q .. 16+4q+3 of that block, in the unpack's order; read back in that order the words
    give the fold's codes exactly."""
    w = mxfp4.quantize(torch.randn(n, k, generator=torch.Generator().manual_seed(n + k)).to(torch.bfloat16))
    packed = folded_weight(w, k // 32, packed=True)
    words = unpack_codes(rs_codes(packed.codes))  # block b, word q, code i at 32 b + 8 q + i
    natural = torch.empty_like(words)
    for q in range(4):
        for i in range(8):
            natural[:, 16 * (i // 4) + 4 * q + i % 4::32] = words[:, 8 * q + i::32]
    assert torch.equal(natural, unpack_codes(packed.codes))


def test_shift_plane_gives_each_k_step_its_own_16_byte_tile():
    shift = torch.arange(3 * 12, dtype=torch.uint8).view(3, 12)  # 12 blocks
    plane = shift_plane(shift, 8)  # 8 blocks a step: 2 steps, the second one half full
    assert plane.shape == (3, 32)
    assert torch.equal(plane[:, :8], shift[:, :8]) and not plane[:, 8:16].any()
    assert torch.equal(plane[:, 16:20], shift[:, 8:]) and not plane[:, 20:].any()


def test_rs_weight_is_cached_and_follows_in_place_changes():
    w = mxfp4.quantize(torch.randn(64, 512).to(torch.bfloat16))
    first = fold.rs_weight(w, 16, 8)
    assert fold.rs_weight(w, 16, 8) is first
    w.data[0, 0] ^= 0x11
    assert fold.rs_weight(w, 16, 8) is not first


@pytest.mark.parametrize("fields, rule", [
    (dict(blocks_per_step=2), "blocks_per_step in \\(4, 8, 16\\)"),
    (dict(block_m=128), "block_m \\(A rows\\) in \\(16, 32, 64\\)"),
    (dict(block_n=128), "block_n = 16 \\* num_warps"),
    (dict(num_stages=1), "num_stages >= 2"),
    (dict(packed=True), "always reads the packed weight"),
])
def test_rs_config_rules_name_the_field(fields, rule):
    base = dict(block_m=16, block_n=64, split_k=1, num_warps=4, num_stages=3, blocks_per_step=8, kernel="int8_rs")
    with pytest.raises(ValueError, match=rule):
        KernelConfig(**(base | fields))


def test_rs_check_bounds_the_segment_and_shared_memory():
    cfg = KernelConfig(16, 64, 14, 4, 4, 8, "int8_rs")
    # K = 7168 in 14 splits of 16 blocks: 2 steps of 16 x 256 bytes of A, 4 slots of 64 x 128 + 64 x 16
    assert launch.rs_steps(7168, cfg) == 2
    assert launch.rs_smem(7168, cfg) == 2 * 16 * 256 + 4 * (64 * 128 + 64 * 16 + 8) + 16 * 32
    launch.rs_check(7168, cfg)
    with pytest.raises(ValueError, match="more than 4 steps or 8192 elements: use more splits"):
        launch.rs_check(7168, KernelConfig(16, 64, 4, 4, 4, 8, "int8_rs"))  # 7 -> 8 steps
    with pytest.raises(ValueError, match="more than 4 steps or 8192 elements"):
        launch.rs_check(512, KernelConfig(64, 64, 1, 4, 4, 8, "int8_rs"))  # 64 x 512 elements


@pytest.mark.skipif(RS, reason="checks the refusal where the kernel cannot run")
def test_rs_refuses_clearly_where_it_cannot_run():
    a = torch.randn(4, 512).to(torch.bfloat16)
    w = mxfp4.quantize(torch.randn(64, 512).to(torch.bfloat16))
    with pytest.raises(RuntimeError, match="int8_rs kernel is Gluon code"):
        launch.launch_a4w4(a, w, torch.empty(4, 64, dtype=torch.bfloat16), KernelConfig(16, 64, 1, 4, 3, 8, "int8_rs"))


def _spread_rows(x: torch.Tensor, lo: int, hi: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    j = torch.randint(lo, hi + 1, (x.shape[0], x.shape[1] // 32), generator=g).float()
    return (x.float().cpu() * torch.pow(2.0, j).repeat_interleave(32, 1)).to(x.dtype).to(x.device)


RS_CONFIGS = [KernelConfig(16, 64, 1, 4, 3, 16, "int8_rs"), KernelConfig(16, 64, 4, 4, 4, 4, "int8_rs"),
              KernelConfig(16, 64, 14, 4, 4, 16, "int8_rs"), KernelConfig(32, 64, 2, 4, 3, 8, "int8_rs"),
              KernelConfig(64, 64, 4, 4, 2, 4, "int8_rs")]


def _fits(k: int, cfg: KernelConfig) -> bool:
    try:
        launch.rs_check(k, cfg)
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
        launch.launch_a4w4(a, w, out, cfg)
        assert testing.check_gemm(out, a, w).passed, cfg


@pytest.mark.gpu
@needs_rs
def test_rs_special_values_and_determinism_on_gpu():
    """NaN / Inf rows (their output rows NaN), zero, subnormal and saturating blocks, through the
    library's entry point; 100 calls with split-K give the same bits."""
    from test_int8 import special_rows

    a = special_rows(16, 7168, 5).cuda()
    w = mxfp4.quantize(torch.randn(2112, 7168, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16).cuda())
    cfg = KernelConfig(16, 64, 14, 4, 4, 16, "int8_rs")
    first = mxfp4.gemm_a4w4(a, w, config=cfg)
    assert testing.check_gemm(first, a, w).passed
    assert torch.isnan(first[0]).all() and torch.isnan(first[1]).all()
    for _ in range(100):  # bits compared (NaN != NaN)
        assert torch.equal(mxfp4.gemm_a4w4(a, w, config=cfg).view(torch.int16), first.view(torch.int16))
