"""The weight-streaming GEMMs' parameter sets: ``StreamParams`` (``cuda/csrc/gemm_stream.cu``), its grouped
build over a mixture of experts (``GroupedStreamParams``) and ``BandParams`` (``cuda/csrc/gemm_band.cu``), and
the stream-K split they share."""
from __future__ import annotations

import dataclasses

from .problem import SMEM_LIMIT, Problem, _with_output, grouped_chunks


class _StreamK:
    """What the two weight-streaming GEMMs' parameter sets share (``StreamParams``, ``BandParams``): 8 * mt
    token rows, and the grid of the stream-K split (csrc/streamk.cuh) of a problem's units, a tile
    (``rows``) by ``ks`` blocks (the streaming GEMM splits at slices of max(8, 4 kw) blocks, the banded GEMM at units)."""

    @property
    def tokens(self) -> int:
        return 8 * self.mt

    def units(self, p: Problem) -> int:
        """Work units of ``p``: tiles of ``rows`` weight rows times chunks of ks blocks."""
        return -(-p.n // self.rows) * -(-p.blocks // self.ks)

    def grid(self, p: Problem, sm_count: int) -> int:
        """CTAs: one an SM, or one a unit where ``p`` has fewer (every CTA takes at least one)."""
        return min(sm_count, self.units(p))


@dataclasses.dataclass(frozen=True)
class StreamParams(_StreamK):
    """One call of the weight-streaming GEMM (``cuda/csrc/gemm_stream.cu``): A quantized once into a
    workspace (``mxfp4_quantize_tokens``, quantize.cu), then the GEMM as its programmatic dependent.

    mt: token rows held, 8 * mt (M <= 8 * mt); g: 16-row weight groups of a tile (even); kw: consumer
    warps that share a group (g * kw consumer warps and a producer warp a CTA); ks: K blocks of a unit
    (a multiple of 8), the ring's stage; stages: the ring's depth. The grid is one CTA an SM (or one
    a unit, when there are fewer), each taking an equal share of the tiles' blocks: to max(8, 4 kw)
    blocks where each CTA holds 8 units or more (its range's first and last unit can then be short),
    else to a unit.
    sign_split: the weight codes' signs split over two MMAs (the positive codes' magnitudes
    and the negative ones', each one byte-permute for 4 codes) instead of one MMA on codes converted
    to signed int8 (three byte-permutes and three more integer instructions for 4 codes). out_f32:
    the output is the float32 total unrounded (a row-parallel partial). one_token: M = 1 (mt 1), so
    only the MMAs' even columns are scaled and summed (half the float work a block)."""

    source = "gemm_stream.cu"

    mt: int = 1
    g: int = 4
    kw: int = 2
    ks: int = 16
    stages: int = 6
    sign_split: bool = False
    out_f32: bool = False
    one_token: bool = False

    def defines(self) -> dict[str, int]:
        defines = dict(MT=self.mt, G=self.g, KW=self.kw, KS=self.ks, STAGES=self.stages,
                       SIGN_SPLIT=int(self.sign_split), ONE_TOKEN=int(self.one_token))
        return _with_output(defines, self.out_f32)

    @property
    def threads(self) -> int:
        return (self.g * self.kw + 1) * 32

    @property
    def rows(self) -> int:
        return 16 * self.g

    def stage_bytes(self) -> int:
        """A stage of the ring: codes, scale units, A's int8 values and half-scales of ks blocks."""
        return self.ks * (256 * self.g + 16 * self.g + 36 * self.tokens)

    def smem_bytes(self) -> int:
        """Dynamic shared memory: the ring, the warps' totals of a tile and the owned tile's partial
        (row pitch rows + 4 floats), the ring's barriers (``Smem::BYTES`` in gemm_stream.cu, which
        exports it as ``mxfp4_stream_smem_bytes``; the tests compare the two)."""
        pitch = self.rows + 4
        return self.stages * self.stage_bytes() + (self.kw + 1) * self.tokens * pitch * 4 + 16 * self.stages

    def workspace_offsets(self, p: Problem, grid: int) -> tuple[int, int, int, int]:
        """The per-call workspace, in bytes from its start: (A's half-scales, the CTAs' flags, their
        partial tiles, the end). A's int8 values (K/32 blocks of tokens x 32) come first, then the
        half-scales (K/32 blocks of tokens, float32; each block in quantize.cu's order for ``mt`` tiles),
        the flags [grid] u32 (to 256 bytes) and the partials [grid][tokens][16 g] float32."""
        scales = self.tokens * p.k
        flags = scales + self.tokens * p.blocks * 4
        part = flags + -(-grid * 4 // 256) * 256
        return scales, flags, part, part + grid * self.tokens * self.rows * 4

    def check(self) -> None:
        rules = [
            (self.mt in (1, 2, 4, 8), "mt must be 1, 2, 4 or 8"),
            (self.g >= 2 and self.g % 2 == 0, "g must be even (a tile holds whole 32-row scale units)"),
            (self.kw >= 1 and self.ks % 8 == 0 and self.ks > 0 and self.ks % (4 * self.kw) == 0,
             "ks must be a positive multiple of 8 and of 4 kw (a warp's blocks of a unit, in rounds of 4)"),
            (self.kw & (self.kw - 1) == 0, "kw must be a power of 2 (a CTA's share is whole rounds of 4 kw blocks)"),
            (self.stages >= 2, "stages must be at least 2"),
            (not self.one_token or self.mt == 1, "one_token needs mt 1"),
            (self.threads <= 1024, "g * kw + 1 warps must be at most 32"),
            (self.smem_bytes() <= SMEM_LIMIT, f"shared memory {self.smem_bytes()} > {SMEM_LIMIT}"),
        ]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"StreamParams {self}: {rule}")

    def fits(self, p: Problem) -> bool:
        return p.m <= self.tokens and (p.m == 1 or not self.one_token)


GROUPED_STATIC_SMEM = 256
"""Static shared memory a grouped kernel's chunk search may take (csrc/grouped.cuh: warp sums and its answer)."""


@dataclasses.dataclass(frozen=True)
class GroupedStreamParams:
    """The grouped GEMM of a mixture of experts at decode sizes (``gemm_stream.cu`` built with GROUPED): A's T
    rows, sorted by expert, quantized once by ``mxfp4_quantize_grouped`` (quantize.cu), each expert's rows cut
    into chunks of at most ``tile.tokens`` rows, a chunk one token operand (a slot); then
    ``mxfp4_gemm_stream_grouped``, one CTA an SM, the streaming GEMM's stream-K split over every chunk's tiles
    of its expert's weight (each touched expert's weight streamed once a chunk). Both kernels find the chunks
    on the device from the offsets, so the grid depends on T and E only. ``tile``: the streaming GEMM's
    variant (not one_token: a chunk holds up to ``tile.tokens`` rows; out_f32 for a call with a bias)."""

    source = "gemm_stream.cu"
    MAX_EXPERTS = 12288
    """Experts a call may have: the quantizer holds their ends in shared memory (4 E bytes, 48 KiB without an
    opt-in)."""

    tile: StreamParams = StreamParams()

    def defines(self) -> dict[str, int]:
        return {**self.tile.defines(), "GROUPED": 1}

    @property
    def threads(self) -> int:
        return self.tile.threads

    @property
    def tokens(self) -> int:
        return self.tile.tokens

    def chunks(self, t: int, e: int) -> int:
        """An upper bound on the chunks of T rows over E experts (``problem.grouped_chunks``)."""
        return grouped_chunks(t, e, self.tokens)

    def slots(self, t: int, e: int) -> int:
        """The operand's slots: chunk j of expert e sits in slot ceil(start_e / tokens) + e + j, below this."""
        return -(-t // self.tokens) + e

    def grid(self, t: int, e: int, p: Problem, sm_count: int) -> int:
        """CTAs: one an SM, or one a unit of the most chunks T rows can make, where there are fewer."""
        return min(sm_count, self.chunks(t, e) * self.tile.units(p))

    def smem_bytes(self, e: int) -> int:
        """Dynamic shared memory: the tile's (``StreamParams.smem_bytes``) and the chunks' table of E experts
        (``mx::grouped_chunks_bytes``: 4 (3 E + 1) bytes)."""
        return self.tile.smem_bytes() + 4 * (3 * e + 1)

    def workspace_offsets(self, t: int, e: int, k: int, grid: int) -> tuple[int, int, int, int]:
        """The per-call workspace, in bytes from its start: (A's half-scales, the CTAs' flags, their partial
        tiles, the end). A's int8 values ([slots][K/32][tokens x 32]) come first, then the half-scales
        ([slots][K/32][tokens] float32), the flags [grid] u32 (to 256 bytes) and the partials
        [grid][tokens][rows] float32. Only the chunks' slots are written."""
        rows = self.slots(t, e) * self.tokens
        scales = rows * k
        flags = scales + rows * (k // 32) * 4
        part = flags + -(-grid * 4 // 256) * 256
        return scales, flags, part, part + grid * self.tokens * self.tile.rows * 4

    def check(self) -> None:
        self.tile.check()
        if self.tile.one_token:
            raise ValueError(f"GroupedStreamParams {self}: a chunk holds up to tile.tokens rows (tile.one_token False)")

    def fits(self, p: Problem, experts: int) -> bool:
        """``p``: one expert's problem (any rows: the kernel runs chunks of ``tokens``); ``experts``: E."""
        return experts <= self.MAX_EXPERTS and self.smem_bytes(experts) + GROUPED_STATIC_SMEM <= SMEM_LIMIT


BAND_MAX_K = 512 * 256
"""K the banded GEMM takes at most: its table of the segments' band masks holds 512 (MAXSEG in
gemm_band.cu)."""


@dataclasses.dataclass(frozen=True)
class BandParams(_StreamK):
    """One call of the banded weight-streaming GEMM (``cuda/csrc/gemm_band.cu``): A quantized once into a
    workspace in three bands (``mxfp4_quantize_bands``, quantize.cu), then the GEMM as its programmatic
    dependent: the weight in registers as wgmma's A operand, the tokens from shared memory, each 256-element
    segment's block sums added inside the tensor core (the fold; docs/design.md).

    mt: token rows held, 8 * mt (M <= 8 * mt: the wgmma's N, 8, 16 or 32); wg: consumer warpgroups, each
    owning 64 weight rows of a tile (64 * wg rows; a producer warpgroup beside them); ks: K blocks of a unit
    (a multiple of 8: whole segments), the ring's stage; stages: the ring's depth; depth: a fold's blocks in
    flight (their conversions held in registers, depth - 1 wgmma groups pending); sign_split: the codes' signs
    split over two wgmma a block (the positive and the negative codes' magnitudes, one byte-permute for 4
    codes each), else one wgmma on signed codes (two byte-permutes and two more integer instructions for 4).
    The grid is one CTA an SM (or one a unit, when there are fewer), each taking an equal share of the units
    (a tile by ks blocks). out_f32: the output is the float32 total unrounded (a row-parallel partial)."""

    source = "gemm_band.cu"
    BANDS = 3
    """A's bands (two folded, one term by term), each a tile of ks blocks in a stage."""
    MAXSEG = BAND_MAX_K // 256

    mt: int = 1
    wg: int = 2
    ks: int = 16
    stages: int = 4
    depth: int = 4
    sign_split: bool = False
    out_f32: bool = False

    def defines(self) -> dict[str, int]:
        return _with_output(dict(MT=self.mt, WG=self.wg, KS=self.ks, STAGES=self.stages, DEPTH=self.depth,
                                 SPLIT=int(self.sign_split)), self.out_f32)

    @property
    def threads(self) -> int:
        return 128 * self.wg + 128

    @property
    def rows(self) -> int:
        return 64 * self.wg

    def stage_bytes(self) -> int:
        """A stage of the ring: codes (16 bytes a row and block), scale units (1), A's three bands
        (tokens x 32 int8 and tokens x 4 bytes of half-scales a block each)."""
        return self.ks * (17 * self.rows + self.BANDS * 36 * self.tokens)

    def smem_bytes(self) -> int:
        """Dynamic shared memory: the ring, the segments' band masks, the weight rows' scan (double-buffered:
        16 + 4 bytes a row and segment, two W-loose words a warpgroup and segment), the owned tile's partial,
        the barriers (``Smem::BYTES`` in gemm_band.cu, which exports it as ``mxfp4_band_smem_bytes``; the
        tests compare the two)."""
        segs = self.ks // 8
        scan = 2 * self.wg * segs * (64 * 20 + 8)
        return (self.stages * self.stage_bytes() + self.MAXSEG * 4 + scan + self.tokens * self.rows * 4
                + (2 * self.stages + 1) * 8)

    def workspace_offsets(self, p: Problem, grid: int) -> tuple[int, int, int, int, int]:
        """The per-call workspace, in bytes from its start: (the bands' half-scales, the segments' masks,
        the CTAs' flags, their partial tiles, the end). The bands' values [3][nblk8][tokens x 32] int8 come
        first (nblk8: K/32 rounded up to whole segments), then their half-scales [3][nblk8][tokens] float32,
        the masks [nblk8 / 8] u32 (to 256 bytes), the flags [grid] u32 (to 256 bytes) and the partials
        [grid][tokens][64 wg] float32."""
        nblk8 = -(-p.blocks // 8) * 8
        scales = self.BANDS * nblk8 * self.tokens * 32
        meta = scales + self.BANDS * nblk8 * self.tokens * 4
        flags = meta + -(-(nblk8 // 8) * 4 // 256) * 256
        part = flags + -(-grid * 4 // 256) * 256
        return scales, meta, flags, part, part + grid * self.tokens * self.rows * 4

    def check(self) -> None:
        rules = [
            (self.mt in (1, 2, 4), "mt must be 1, 2 or 4"),
            (self.wg in (1, 2, 3), "wg must be 1, 2 or 3"),
            (self.wg < 3 or (self.mt == 1 and self.depth <= 4),
             "wg 3 holds 8 tokens and 4 blocks in flight at most (its 152 registers a thread)"),
            (self.depth in (2, 4, 6, 8) and (self.depth <= 4 or self.mt < 4),
             "depth must be 2, 4, 6 or 8 (4 at most at mt 4)"),
            (self.ks % 8 == 0 and 8 <= self.ks <= 64, "ks must be a multiple of 8 from 8 to 64"),
            (self.stages >= 2, "stages must be at least 2"),
            (self.smem_bytes() <= SMEM_LIMIT, f"shared memory {self.smem_bytes()} > {SMEM_LIMIT}"),
        ]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"BandParams {self}: {rule}")

    def fits(self, p: Problem) -> bool:
        return p.m <= self.tokens and p.k <= BAND_MAX_K
