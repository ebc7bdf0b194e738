"""``DecodeParams``: the two-launch decode kernels' (``cuda/csrc/gemm_decode.cu``)."""
from __future__ import annotations

import dataclasses

from .problem import SMEM_LIMIT, Problem, _with_output


@dataclasses.dataclass(frozen=True)
class DecodeParams:
    """One call of the two-launch decode kernels (``cuda/csrc/gemm_decode.cu``): A quantized once
    into a workspace, then the GEMM, chained by programmatic dependent launch.

    mt: token rows held, 8 * mt (M <= 8 * mt); g: 16-row weight groups a CTA owns; kw: warps that
    share a group's K range (g * kw warps a CTA); depth: blocks of weight bytes in flight a warp (with
    smem_weight, the main loop's unroll); split: CTAs of a cluster that share K (1..16; above 8 a
    non-portable cluster). out_f32: the output is the float32 total unrounded (a row-parallel
    partial, ``ops.gemm_a4w4_partial``). smem_weight: each warp's K range of the weight comes by one
    bulk copy into shared memory (the scales' loads first), instead of per-lane loads into registers.
    """

    source = "gemm_decode.cu"

    mt: int = 1
    g: int = 4
    kw: int = 4
    depth: int = 8
    split: int = 1
    out_f32: bool = False
    smem_weight: bool = False

    def defines(self) -> dict[str, int]:
        defines = dict(MT=self.mt, G=self.g, KW=self.kw, DEPTH=self.depth)
        if self.smem_weight:  # absent otherwise: the register-path variants keep their cached cubins
            defines["SMEM_W"] = 1
        return _with_output(defines, self.out_f32)

    @property
    def threads(self) -> int:
        return self.g * self.kw * 32

    @property
    def tokens(self) -> int:
        return 8 * self.mt

    def smem_bytes(self, k: int) -> int:
        """Dynamic shared memory at K = k: A's int8 values and half-scales and the weight's half-scales
        of a CTA's K range (ceil(k / 32 / split) blocks), the warps' totals, the CTA's partial, A's copies'
        barrier; with smem_weight a barrier a warp (to 16 bytes) and each warp's K range of the codes
        (``Smem{nb}.bytes()`` in gemm_decode.cu, which exports it for every nb that fits as
        ``mxfp4_decode_smem_bytes``; the tests compare the two)."""
        nb = -(-(k // 32) // self.split)
        tok, rows = self.tokens, 16 * self.g
        body = nb * tok * 36 + nb * rows * 4 + (self.kw + 1) * rows * tok * 4
        if not self.smem_weight:
            return body + 8
        warps = self.g * self.kw
        return body + (warps + 2) // 2 * 16 + warps * -(-nb // self.kw) * 256

    def workspace_bytes(self, k: int) -> int:
        """A quantized, per call: int8 values [K/32][tokens][32], then float32 half-scales."""
        return self.tokens * k + self.tokens * (k // 32) * 4

    def check(self) -> None:
        rules = [
            (self.mt in (1, 2, 4, 8), "mt must be 1, 2, 4 or 8"),
            (self.g >= 1 and self.kw >= 1 and self.threads <= 1024, "g * kw must be 1..32 warps"),
            (1 <= self.depth <= 16, "depth must be in 1..16"),
            (1 <= self.split <= 16, "split must be in 1..16 (a cluster)"),
            (self.smem_bytes(32 * self.split) <= SMEM_LIMIT,
             f"shared memory {self.smem_bytes(32 * self.split)} > {SMEM_LIMIT} at one block of K a CTA"),
        ]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"DecodeParams {self}: {rule}")

    def fits(self, p: Problem) -> bool:
        return p.m <= self.tokens and self.split <= p.blocks and self.smem_bytes(p.k) <= SMEM_LIMIT
