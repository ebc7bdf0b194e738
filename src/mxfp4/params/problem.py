"""The problem a kernel runs (C = A x W^T), the launch limits every parameter set checks against, and what
the parameter sets share (``valid``, the float32-output define)."""
from __future__ import annotations

import dataclasses

SMEM_LIMIT = 227 * 1024
"""Dynamic shared memory a CTA may use on Hopper."""

MAX_GRID_Y = 65535
"""The largest grid.y a launch takes (the short-K kernel's tiles of tokens)."""

SEGMENT_BLOCKS = 8
"""Blocks of 32 elements in a segment of the large-M kernels (SEG in csrc/wgmma_blob.cuh, which
gemm_wgmma.cu exports as mxfp4_wgmma_segment_blocks)."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """C [m, n] = A [m, k] x W [n, k]^T."""

    m: int
    n: int
    k: int

    @property
    def blocks(self) -> int:
        return self.k // 32


def valid(params) -> bool:
    """Whether ``params.check()`` passes (a candidate the kernel can build and launch)."""
    try:
        params.check()
    except ValueError:
        return False
    return True


def _with_output(defines: dict[str, int], out_f32: bool) -> dict[str, int]:
    """A variant's defines with OUT_F32 for the float32-output twin (absent otherwise: the bf16
    variants keep their cached cubins)."""
    return {**defines, "OUT_F32": 1} if out_f32 else defines


def grouped_chunks(t: int, e: int, rows: int) -> int:
    """An upper bound on the chunks of at most ``rows`` rows that T rows over E experts make (each non-empty
    expert's rows rounded up to whole chunks: at most min(E, T) partial ones), so a grouped kernel's grid and
    workspace need no offsets."""
    return min(e, t) + t // rows
