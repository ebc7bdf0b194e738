"""Host side of the eighth session's register-operand experiment (tools/gluon_rs_kernel.py):
the weight's packed fold in wgmma fragment order, the block-shift plane, the config checks and
the launch. Not library code: the kernel was slower than int8_fused on every shape tuned.

Usage (GPU box, repo root): import it with tools/ on sys.path (tests/test_tools.py does), e.g.
``launch_rs(a, w, out, RSConfig(block_a=16, split_k=14, stages=4, blocks_per_step=16))``.
"""
from __future__ import annotations

import dataclasses

import torch

from mxfp4 import launch
from mxfp4 import fold as mxfold
from mxfp4.formats import BLOCK, ScaleRule
from mxfp4.tensor import MXFP4Tensor
from mxfp4.tuning import KernelConfig, pow2_at_least

SMEM = 220 * 1024
"""Shared memory a program may take (the H200 gives 227 KB)."""
A_ELEMS = 8192
"""A elements a program holds in registers (its segment in one load: 64 per thread with 4
warps; 16 x 1024 spilled in the sm_90 compile)."""
W_ROWS = 64
"""Weight rows per program: one warpgroup (two were slower on every shape tried)."""

# K offset (within its MX block) of code i of word q in rs_codes' order
_RS_ORDER = tuple(16 * (i // 4) + 4 * q + i % 4 for q in range(4) for i in range(8))


@dataclasses.dataclass(frozen=True)
class RSConfig:
    """block_a: A rows per program (16, 32 or 64: the wgmma's n); split_k: K splits (each one
    fold segment, a whole number of K steps); stages: weight loads in flight (>= 2);
    blocks_per_step: the K step in MX blocks (4, 8 or 16)."""

    block_a: int = 16
    split_k: int = 1
    stages: int = 4
    blocks_per_step: int = 8

    def __post_init__(self) -> None:
        if self.block_a not in (16, 32, 64):
            raise ValueError(f"RSConfig.block_a must be 16, 32 or 64, got {self.block_a}")
        if self.blocks_per_step not in (4, 8, 16):
            raise ValueError(f"RSConfig.blocks_per_step must be 4, 8 or 16, got {self.blocks_per_step}")
        if self.stages < 2 or self.split_k < 1:
            raise ValueError(f"RSConfig needs stages >= 2 and split_k >= 1, got {self}")


# This experiment's byte order within a word of 8 codes e0 .. e7: bytes e0|e2<<4, e4|e6<<4,
# e1|e3<<4, e5|e7<<4 (the library's packed weight used it until its nineteenth session)
_LOW_NIBBLES = (0, 4, 1, 5)
_HIGH_NIBBLES = (2, 6, 3, 7)


def pack_words(codes: torch.Tensor) -> torch.Tensor:
    """uint8 [R, K/2] from codes [R, K] (K % 8 == 0) in the word byte order above."""
    r, k = codes.shape
    c = codes.to(torch.uint8).view(r, k // 8, 8)
    return (c[:, :, list(_LOW_NIBBLES)] | (c[:, :, list(_HIGH_NIBBLES)] << 4)).view(r, k // 2)


def unpack_words(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`pack_words`: codes uint8 [R, K]."""
    r, half = packed.shape
    p = packed.view(r, half // 4, 4)
    c = torch.empty((r, half // 4, 8), dtype=torch.uint8, device=packed.device)
    c[:, :, list(_LOW_NIBBLES)] = p & 15
    c[:, :, list(_HIGH_NIBBLES)] = p >> 4
    return c.view(r, half * 2)


def rs_codes(codes: torch.Tensor) -> torch.Tensor:
    """e2m1 codes [R, K] packed (:func:`pack_words`) so that word q (bytes 4q .. 4q+3) of each MX
    block holds the codes of the block's K offsets 4q .. 4q+3 and 16+4q .. 16+4q+3 (the wgmma
    A-operand fragment of lane % 4 == q)."""
    k = codes.shape[1]
    order = torch.tensor(_RS_ORDER, device=codes.device)
    idx = (torch.arange(0, k, BLOCK, device=codes.device)[:, None] + order[None, :]).reshape(-1)
    return pack_words(codes[:, idx])


def rs_fold(w: MXFP4Tensor, seg: int) -> tuple[torch.Tensor, torch.Tensor, mxfold.PackedFold]:
    """(codes in :func:`rs_codes`' order, block shifts uint8 [R, K/32], the packed fold) of a weight."""
    pf = mxfold.folded_weight(w, seg, 2)
    k = pf.block_scale.shape[1] * BLOCK
    codes = mxfold.unpack_codes(pf.codes, k)
    return rs_codes(codes).contiguous(), mxfold.unpack_shifts(pf.shift, k // BLOCK, 2), pf


def shift_plane(shift: torch.Tensor, blocks_per_step: int) -> torch.Tensor:
    """Block shifts uint8 [R, K/32] as one 16-byte tile per row and K step of ``blocks_per_step``
    (<= 16) blocks, zero padded: uint8 [R, 16 * steps], for TMA beside the codes."""
    r, kb = shift.shape
    steps = -(-kb // blocks_per_step)
    padded = torch.zeros((r, steps * blocks_per_step), dtype=torch.uint8, device=shift.device)
    padded[:, :kb] = shift
    plane = torch.zeros((r, steps, 16), dtype=torch.uint8, device=shift.device)
    plane[:, :, :blocks_per_step] = padded.view(r, steps, blocks_per_step)
    return plane.view(r, steps * 16)


def segments(k: int, cfg: RSConfig) -> tuple[int, int]:
    """(blocks per segment, segments): the int8 kernels' rule (all of K, or split_k splits
    rounded to whole K steps), by way of the int8_fused config with the same split and step."""
    seg, segs, _ = launch._int8_shape(k, KernelConfig(16, 64, cfg.split_k, 4, 3, cfg.blocks_per_step, "int8_fused"))
    return seg, segs


def steps(k: int, cfg: RSConfig) -> int:
    """K steps of the longest segment, rounded up to a power of two."""
    return pow2_at_least(-(-segments(k, cfg)[0] // cfg.blocks_per_step))


def smem(k: int, cfg: RSConfig) -> int:
    """Shared-memory bytes of a program: A's folded segment, the ring of weight codes and shift
    tiles, the block-by-block path's A tile and the ring's barriers."""
    bk = BLOCK * cfg.blocks_per_step
    ring = cfg.stages * (W_ROWS * bk // 2 + W_ROWS * 16 + 8)
    return steps(k, cfg) * cfg.block_a * bk + ring + cfg.block_a * BLOCK


def check(k: int, cfg: RSConfig) -> None:
    """Raise ValueError unless a program fits at this K: its segment in at most 4 K steps and
    A_ELEMS elements of A (one load), and SMEM bytes of shared memory."""
    n_steps, bk = steps(k, cfg), BLOCK * cfg.blocks_per_step
    if n_steps > 4 or cfg.block_a * n_steps * bk > A_ELEMS:
        raise ValueError(f"{cfg} at K = {k}: a segment of {n_steps} K steps of {bk} for {cfg.block_a} rows is "
                         f"more than 4 steps or {A_ELEMS} elements: use more splits")
    if smem(k, cfg) > SMEM:
        raise ValueError(f"{cfg} needs {smem(k, cfg)} bytes of shared memory at K = {k}, more than {SMEM}")


def available() -> bool:
    """A CUDA device of compute capability 9.0 and no Triton CPU interpreter."""
    return (not launch.interpreter_enabled() and torch.cuda.is_available()
            and torch.cuda.get_device_capability() == (9, 0))


def launch_rs(a2: torch.Tensor, w: MXFP4Tensor, out2: torch.Tensor, cfg: RSConfig) -> None:
    """C = A W^T (bf16 [M, N]) in one launch of tools/gluon_rs_kernel.py (exact, as the library's
    kernels); the weight's fold is made on every call here (the library would cache it)."""
    if not available():
        raise RuntimeError("the register-operand kernel is Gluon code for sm_90 GPUs: Triton's CPU interpreter "
                           "cannot run it")
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from gluon_rs_kernel import a4w4_rs_kernel

    (m, k), n = a2.shape, w.shape[0]
    check(k, cfg)
    seg, segs = segments(k, cfg)
    codes, shift, fold = rs_fold(w, seg)
    plane = shift_plane(shift, cfg.blocks_per_step)
    bk = BLOCK * cfg.blocks_per_step

    def desc(t: torch.Tensor, cols: int):
        return TensorDescriptor.from_tensor(t, [W_ROWS, cols],
                                            gl.NVMMASharedLayout.get_default_for([W_ROWS, cols], gl.uint8))

    tiles = -(-m // cfg.block_a) * -(-n // W_ROWS)
    cnt = torch.zeros(tiles, dtype=torch.int32, device=a2.device)
    part = torch.empty(tiles * segs * W_ROWS * cfg.block_a if segs > 1 else 1, dtype=torch.float32,
                       device=a2.device)
    a4w4_rs_kernel[(tiles * segs,)](
        a2, a2.stride(0), a2.stride(1), desc(codes, bk // 2), desc(plane, 16), codes, shift, fold.block_scale,
        fold.seg_scale, fold.folded, out2, out2.stride(0), out2.stride(1), part, cnt, m, n, k, seg, segs,
        BA=cfg.block_a, BK=bk, STAGES=cfg.stages, SEG_STEPS=steps(k, cfg), FLOOR_RULE=w.scale_rule is ScaleRule.FLOOR,
        USE_SPLIT=segs > 1, num_warps=4)
