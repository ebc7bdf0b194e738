"""The kernels' parameter sets: one compiled variant (or launch) of each GEMM, and the problem it runs.

``SmallParams``: ``cuda/csrc/gemm_small.cu`` (one launch at short K, no ring, no K split across
CTAs); ``DecodeParams``: ``cuda/csrc/gemm_decode.cu`` (A quantized once, then the GEMM);
``StreamParams``: ``cuda/csrc/gemm_stream.cu`` (A quantized once, then the weight streamed through a
ring, every SM an equal share); ``BandParams``: ``cuda/csrc/gemm_band.cu`` (the same streaming with A in
three bands and each segment's block sums added inside the tensor core); ``WgmmaParams``:
``cuda/csrc/gemm_wgmma.cu`` (the large-M kernels);
``GroupedParams``: the grouped GEMM of a mixture of experts (in ``gemm_decode.cu``). Each states its
kernel's shared memory (the kernel exports its own, and the tests compare them), checks what the
kernel needs and says which problems it takes; :mod:`mxfp4.plan` chooses among them (and names them too).
"""
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


class _StreamK:
    """What the two weight-streaming GEMMs' parameter sets share (``StreamParams``, ``BandParams``): 8 * mt
    token rows, and the stream-K split of a problem into units of a tile (``rows``) by ``ks`` blocks over
    the grid (csrc/streamk.cuh)."""

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
    a unit, when there are fewer), each taking an equal share of the units (a tile by ks blocks).
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
        partial tiles, the end). A's int8 values [K/32][tokens][32] come first, then the half-scales
        [K/32][tokens] float32, the flags [grid] u32 (to 256 bytes) and the partials [grid][tokens][16 g]
        float32."""
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


@dataclasses.dataclass(frozen=True)
class WgmmaParams:
    """One launch of the large-M kernels: a CTA computes tn tokens x 128 weight rows. int8_weight: the
    prep also writes the weight as int8 in the layout wgmma reads (``mxfp4_gemm_i8``, tn 128; stages:
    its ring's depth, a segment of K, SEGMENT_BLOCKS blocks, a stage), else the GEMM converts the
    weight's codes into shared memory itself (``mxfp4_gemm_cv``, tn 64 or 128; stages: the depth of
    its ring of codes, which also holds the output tile and the K split's partials: at least 2 at tn
    64, 4 at tn 128; shipped 3 and 4). split: CTAs of a cluster that
    share K (``mxfp4_gemm_cv`` only, 1..8; a launch choice, not a compiled variant). out_f32: the
    output is the float32 totals unrounded (a row-parallel partial, ``ops.gemm_a4w4_partial``),
    stored from registers, not bf16 staged through shared memory. The sizes below state the module's
    own (its exported constants; tests/test_wgmma.py compares them for every shipped variant)."""

    source = "gemm_wgmma.cu"
    C_PITCH = 128 + 8
    """bf16 a token row of the GEMMs' staged output tile (C_PITCH in csrc/wgmma_consumer.cuh)."""

    tn: int = 64
    stages: int = 4
    int8_weight: bool = False
    out_f32: bool = False
    split: int = 1

    def defines(self) -> dict[str, int]:
        """INT8_WEIGHT: the GEMM the module builds beside the prep (mxfp4_gemm_i8 or mxfp4_gemm_cv)."""
        return _with_output(dict(TN=self.tn, STAGES=self.stages, INT8_WEIGHT=int(self.int8_weight)), self.out_f32)

    @property
    def threads(self) -> int:
        """The GEMM's: a producer warpgroup, two consumer warpgroups, and mxfp4_gemm_cv's converter
        (THREADS in csrc/wgmma_i8.cuh, wgmma_cv.cuh)."""
        return 384 if self.int8_weight else 512

    @property
    def meta_bytes(self) -> int:
        """Per token tile and segment: fold multipliers, block multipliers, the tokens' band masks
        (ABlob in csrc/wgmma_blob.cuh)."""
        return self.tn * (5 + 4 * SEGMENT_BLOCKS)

    @property
    def ablob_bytes(self) -> int:
        """One token tile's segment in the workspace: int8 values, then the meta."""
        return self.tn * 32 * SEGMENT_BLOCKS + self.meta_bytes

    @property
    def wblob_bytes(self) -> int:
        """One weight tile's segment as int8: the values, per-block multipliers, the rows' fold starts
        and the masks (int8_weight: in the workspace, written by the prep; else a slot of
        mxfp4_gemm_cv's shared memory, written by its converter; WBlob in csrc/wgmma_blob.cuh)."""
        return 128 * 32 * SEGMENT_BLOCKS + SEGMENT_BLOCKS * 128 * 4 + 128 * 4 + 16

    @property
    def cv_astages(self) -> int:
        """mxfp4_gemm_cv's ring of A's blobs."""
        return 3 if self.tn == 64 else 2

    @property
    def cv_slots(self) -> int:
        """mxfp4_gemm_cv's ring of converted weight tiles."""
        return 3 if self.tn == 64 else 2

    @property
    def cv_wstage_bytes(self) -> int:
        """A stage of mxfp4_gemm_cv's ring of codes: 8 groups x a segment's blocks, the rows' exponents."""
        return 8 * SEGMENT_BLOCKS * 256 + 128 * 8

    @property
    def i8_stage_bytes(self) -> int:
        """A stage of mxfp4_gemm_i8's ring: A's blob and the weight's, each from a 1 KiB boundary."""
        kb = lambda x: -(-x // 1024) * 1024
        return kb(kb(self.ablob_bytes) + self.wblob_bytes)

    def smem_bytes(self) -> int:
        """The GEMM's dynamic shared memory: its Smem::BYTES (csrc/wgmma_i8.cuh, wgmma_cv.cuh), which the
        module exports as mxfp4_wgmma_smem_bytes."""
        kb = lambda x: -(-x // 1024) * 1024
        if self.int8_weight:  # the ring, an atom of zeros, the barriers
            return 1024 + self.stages * self.i8_stage_bytes + 1024 + 2 * self.stages * 8
        # the rings of codes (and rows' exponents), of A's blobs and of converted weight tiles, an atom of zeros
        return (1024 + self.stages * self.cv_wstage_bytes + self.cv_astages * kb(self.ablob_bytes)
                + self.cv_slots * kb(self.wblob_bytes) + 1024 + 2 * (self.stages + self.cv_astages + self.cv_slots) * 8)

    def check(self) -> None:
        rules = [
            (self.tn in (64, 128), "tn must be 64 or 128"),
            (not self.int8_weight or self.tn == 128, "int8_weight needs tn 128"),
            (self.stages >= 2, "stages must be at least 2"),
            # the staged bf16 tile, and the K split's partials: [rows / 8][256 consumer threads] float4, rows
            # a consumer warpgroup's 64 (tn 64) or 128 weight rows (mxfp4_gemm_cv static_asserts the same)
            (self.int8_weight or self.stages * self.cv_wstage_bytes >= max(self.tn * self.C_PITCH * 2,
                                                                           (64 if self.tn == 64 else 128) * 256 * 2),
             "the ring of codes must hold the bf16 output tile and the K split's partials (tn 128: at least 4 stages)"),
            (1 <= self.split <= 8, "split must be in 1..8 (a portable cluster)"),
            (self.split == 1 or not self.int8_weight, "split needs the converting GEMM (int8_weight False)"),
            (not self.int8_weight or self.out_f32 or self.tn * self.C_PITCH * 2 <= self.stages * self.i8_stage_bytes,
             "the ring must hold the bf16 output tile"),
            (self.smem_bytes() <= SMEM_LIMIT, f"shared memory {self.smem_bytes()} > {SMEM_LIMIT}"),
        ]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"WgmmaParams {self}: {rule}")

    def tiles(self, p: Problem) -> int:
        """CTAs of the GEMM's grid for ``p`` before the K split: token tiles x 128-row weight tiles."""
        return -(-p.m // self.tn) * -(-p.n // 128)

    def fits(self, p: Problem) -> bool:
        return self.split <= -(-p.blocks // SEGMENT_BLOCKS)


@dataclasses.dataclass(frozen=True)
class GroupedParams:
    """One call of the grouped GEMM of a mixture of experts (``mxfp4_gemm_grouped`` in
    ``cuda/csrc/gemm_decode.cu``): all T rows of A quantized once, then one launch in which each CTA
    takes one chunk of at most ``tile.tokens`` rows of one expert (found on the device from the
    offsets), one N tile and one part of K, and runs the decode kernel's tile on it.

    ``tile``: the decode variant whose tile it runs (the same cubin: both kernels are in one source).
    """

    source = "gemm_decode.cu"

    tile: DecodeParams = DecodeParams()

    def defines(self) -> dict[str, int]:
        return self.tile.defines()

    @property
    def threads(self) -> int:
        return self.tile.threads

    @property
    def tokens(self) -> int:
        return self.tile.tokens

    def smem_bytes(self, k: int) -> int:
        return self.tile.smem_bytes(k)

    def workspace_bytes(self, t: int, k: int) -> int:
        """A quantized, per call: int8 values [K/32][T][32], then float32 half-scales [K/32][T]."""
        return t * k + t * (k // 32) * 4

    def items(self, t: int, e: int) -> int:
        """Work items launched for T rows over E experts: an upper bound on the chunks of at most
        ``tokens`` rows (each non-empty expert's rows, rounded up), so the grid needs no offsets."""
        return min(e, t) + t // self.tokens

    def check(self) -> None:
        self.tile.check()
        if self.tile.out_f32:
            raise ValueError(f"GroupedParams {self}: the grouped GEMM writes bf16 (tile.out_f32 must be False)")

    def fits(self, p: Problem) -> bool:
        """``p``: one expert's problem (n, k; m is not limited: the kernel runs chunks of ``tokens``)."""
        return self.tile.split <= p.blocks and self.smem_bytes(p.k) + GROUPED_STATIC_SMEM <= SMEM_LIMIT


GROUPED_STATIC_SMEM = 256
"""Static shared memory the grouped kernel's item search may take (warp sums and its answer)."""
