"""``SmallParams``: the short-K kernel's (``cuda/csrc/gemm_small.cu``)."""
from __future__ import annotations

import dataclasses

from .problem import MAX_GRID_Y, SMEM_LIMIT, Problem, _with_output


@dataclasses.dataclass(frozen=True)
class SmallParams:
    """One launch of the short-K kernel (``cuda/csrc/gemm_small.cu``): no producer warp, no ring, no
    K split across CTAs.

    wg: 16-row weight groups a CTA owns; kw: warps that share a group's K (wg * kw warps a CTA);
    mt: token rows a CTA holds, 8 * mt (up to 64; M above it takes ceil(M / (8 * mt)) CTAs along the
    grid's y, each tile of tokens its own clusters); kb: K / 32, compiled in (the loop is unrolled
    over a warp's kb / kw blocks, its weight bytes bulk-copied into shared memory); cluster: CTAs
    along N that share A's quantization (each quantizes 1 / cluster of it into every CTA's shared
    memory). out_f32: the output is the float32 total unrounded (a row-parallel partial,
    ``ops.gemm_a4w4_partial``)."""

    source = "gemm_small.cu"

    wg: int = 2
    kw: int = 4
    mt: int = 1
    kb: int = 16
    cluster: int = 1
    out_f32: bool = False

    def defines(self) -> dict[str, int]:
        return _with_output(dict(WG=self.wg, KW=self.kw, MT=self.mt, KB=self.kb, CL=self.cluster), self.out_f32)

    @property
    def threads(self) -> int:
        return self.wg * self.kw * 32

    @property
    def tokens(self) -> int:
        return 8 * self.mt

    def smem_bytes(self) -> int:
        """Dynamic shared memory: A's int8 values and half-scales, the weight's codes, its 32-row scale
        units, the mbarriers (one a warp and one), and the K parts' totals where A's values cannot hold
        them (``Smem::BYTES`` in gemm_small.cu, which exports it as ``mxfp4_small_smem_bytes``; the tests
        compare the two)."""
        a8 = self.kb * self.tokens * 32
        units = (self.wg + 1) // 2 * -(-self.kb // 8) * 256
        part = (self.kw - 1) * self.wg * self.mt * 512
        bars = -(-(self.wg * self.kw + 1) * 8 // 16) * 16
        return a8 * 9 // 8 + self.wg * self.kb * 256 + units + bars + (part if part > a8 else 0)

    def grid(self, n: int) -> int:
        """CTAs for N = n rows: a CTA per wg groups, rounded up to whole clusters."""
        ctas = -(-n // (16 * self.wg))
        return -(-ctas // self.cluster) * self.cluster

    def check(self) -> None:
        rules = [
            (1 <= self.mt <= 8, "mt must be in 1..8 (at most 64 token rows a CTA)"),
            (self.wg >= 1 and self.kw >= 1 and self.threads <= 512, "wg * kw must be 1..16 warps"),
            (self.kb >= 1 and self.kb % self.kw == 0, "kb must be a positive multiple of kw"),
            (self.kb // self.kw <= 32, "at most 32 blocks a warp (its loop is unrolled over them)"),
            (self.cluster in (1, 2, 4, 8), "cluster must be 1, 2, 4 or 8 (a portable cluster)"),
            ((self.kb * self.tokens * 4) % (32 * self.cluster) == 0,
             "A's quarter blocks must split into whole warps over the cluster"),
            (self.smem_bytes() <= SMEM_LIMIT, f"shared memory {self.smem_bytes()} > {SMEM_LIMIT}"),
        ]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"SmallParams {self}: {rule}")

    def fits(self, p: Problem) -> bool:
        return p.blocks == self.kb and self.m_tiles(p.m) <= MAX_GRID_Y

    def m_tiles(self, m: int) -> int:
        """CTAs along M (grid.y): tiles of 8 * mt token rows."""
        return -(-m // self.tokens)
