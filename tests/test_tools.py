"""CPU checks of the eighth session's Gluon experiment (tools/gluon_probe.py): the packed weight
order its register-operand kernel relies on. The kernels themselves are GPU only (Gluon has no
CPU interpreter); their outputs were compared with the shipped int8 GEMM on the H200."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import mxfp4
from mxfp4.fold import folded_weight, unpack_codes

pytest.importorskip("triton.experimental.gluon")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
gluon_probe = pytest.importorskip("gluon_probe")


@pytest.mark.parametrize("n, k", [(64, 256), (48, 512)])
def test_rs_pack_puts_each_lane_word_in_the_wgmma_fragment_order(n, k):
    """Word q (q = lane % 4) of each block and row must hold the codes of K offsets
    4q .. 4q+3 and 16+4q .. 16+4q+3 of that block, in the unpack's order; read back in that
    order the words give the fold's codes (and through the shifts its int8 values) exactly."""
    w = mxfp4.quantize(torch.randn(n, k, generator=torch.Generator().manual_seed(n + k)).to(torch.bfloat16))
    codes, shift = gluon_probe.rs_pack(w, k)
    assert codes.shape == (n, k // 2) and shift.shape == (n, k // 32)
    words = unpack_codes(codes)  # [n, k]: for block b, word q, code i at 32 b + 8 q + i
    natural = torch.empty_like(words)
    for q in range(4):
        for i in range(8):
            natural[:, 16 * (i // 4) + 4 * q + i % 4::32] = words[:, 8 * q + i::32]
    packed = folded_weight(w, k // 32, packed=True)
    assert torch.equal(natural, unpack_codes(packed.codes))
    assert torch.equal(shift, packed.shift)
    # the shifts rebuild the fold's int8 values from those codes
    assert torch.equal(mxfp4.fold.unpack_fold(packed).q, folded_weight(w, k // 32).q)


def test_shift_plane_gives_each_k_step_its_own_16_byte_tile():
    shift = torch.arange(3 * 12, dtype=torch.uint8).view(3, 12)  # 12 blocks
    plane = gluon_probe.shift_plane(shift, 256)  # 8 blocks a step: 2 steps, the second half full
    assert plane.shape == (3, 32)
    assert torch.equal(plane[:, :8], shift[:, :8]) and not plane[:, 8:16].any()
    assert torch.equal(plane[:, 16:20], shift[:, 8:]) and not plane[:, 20:].any()
