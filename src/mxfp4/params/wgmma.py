"""``WgmmaParams``: the large-M kernels' (``cuda/csrc/gemm_wgmma.cu``); ``GroupedWgmmaParams``: the same kernels
grouped over a mixture of experts' token rows."""
from __future__ import annotations

import dataclasses

from .problem import SEGMENT_BLOCKS, SMEM_LIMIT, Problem, _with_output, grouped_chunks
from .stream import GROUPED_STATIC_SMEM


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
class GroupedWgmmaParams:
    """The grouped GEMM of a mixture of experts at prefill sizes (``gemm_wgmma.cu`` built with GROUPED):
    A's T rows, sorted by expert, quantized by ``mxfp4_wgmma_prep_grouped`` into token tiles of at most
    ``tile.tn`` rows of one expert each, then ``mxfp4_gemm_cv_grouped``, a CTA per tile and 128 rows of
    that expert's weight; both kernels find a tile's expert and rows on the device from the offsets
    (``mx::grouped_item``), so the grid depends on T and E only. ``tile``: the converting GEMM's variant
    (int8_weight False: the prep's int8 weight would be every expert's; split 1; bf16 output, or float32
    for a call with a bias)."""

    source = "gemm_wgmma.cu"

    tile: WgmmaParams = WgmmaParams(64, 3)

    def defines(self) -> dict[str, int]:
        return {**self.tile.defines(), "GROUPED": 1}

    @property
    def threads(self) -> int:
        return self.tile.threads

    def items(self, t: int, e: int) -> int:
        """Token tiles launched for T rows over E experts: an upper bound on the chunks of at most
        ``tile.tn`` rows (``problem.grouped_chunks``)."""
        return grouped_chunks(t, e, self.tile.tn)

    def workspace_bytes(self, t: int, e: int, k: int) -> int:
        """A's tiles as the prep writes them: a blob a token tile and segment of K."""
        return -(-(k // 32) // SEGMENT_BLOCKS) * self.items(t, e) * self.tile.ablob_bytes

    def check(self) -> None:
        self.tile.check()
        rules = [(not self.tile.int8_weight, "the grouped GEMM converts the weight itself (tile.int8_weight False)"),
                 (self.tile.split == 1, "the grouped GEMM does not split K (tile.split 1)")]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"GroupedWgmmaParams {self}: {rule}")

    def fits(self, p: Problem, experts: int) -> bool:
        """``p``: one expert's problem (any rows: the kernel runs chunks of ``tile.tn``); any number of experts."""
        return self.tile.smem_bytes() + GROUPED_STATIC_SMEM <= SMEM_LIMIT
