"""Kernel configurations, the tuned table, and the heuristic default."""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import tempfile
import warnings
from pathlib import Path


KERNELS = ("persistent", "direct", "int8", "int8_fused", "int8_meet")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Tile shape and launch options of the one-launch A4W4 kernel; validated on construction.

    block_m, block_n: output tile (each >= 16, powers of two; block_m see "int8_fused"); K
    advances one MX block (32) per step. split_k: work items sharing one output tile along K,
    reduced inside the launch by the last to arrive. num_warps, num_stages: Triton launch
    options (stages of the K pipeline). blocks_per_step: MX blocks per K step (1, 2, 4, 8); the
    scales of a step's blocks come in one load, so their memory round trip is paid once per
    step.
    kernel: "persistent" (A quantized once per launch, then a grid-wide meeting; the fields
    above) or "direct" (each program quantizes the A rows it needs; no meeting). For "direct",
    split_k is the number of programs along K and blocks_per_step (NB, 1 .. 64) the MX blocks
    each program loads and multiplies at once. "int8" (large M: A
    folded by a first launch, then an int8 matmul, :mod:`mxfp4.kernels.int8`): blocks_per_step
    is the K step in MX blocks, fold_blocks the fold's segment length in MX blocks (0: all of K;
    else a multiple of blocks_per_step), split_k > 1 splits K into that many segments, one
    program each, summed inside the launch (then fold_blocks is 0). "int8_fused" (one launch:
    each program folds the A rows it needs itself, :func:`mxfp4.kernels.fused.a4w4_fused_kernel`):
    blocks_per_step is the K step (1 .. 16 MX blocks), split_k as for "int8", fold_blocks 0;
    with M < block_m only the real rows are quantized; block_m may be below 16 (1 .. 8 A rows
    per program, each repeated into the dot's 16 rows: more programs, each folding fewer rows).
    "int8_meet" (one persistent launch: the programs fold A once, meet, then run the int8
    kernel's work items, :mod:`mxfp4.kernels.meet`): the fields as for "int8".
    packed (the int8 kernels, an even blocks_per_step): read the folded weight at about MXFP4
    size, codes and block shifts unpacked in registers as wgmma's register operand
    (:mod:`mxfp4.kernels.packed`), instead of a byte per value. It halves the weight cache
    (N * K / 2 bytes and a word per row and K step, instead of N * K) but is slower on every
    shape measured on the H200: its best config took 1.08-1.56x the shipped config's time on 9
    shapes at M = 16 .. 512 (nineteenth session, docs/results/s19/packed-run1.txt and
    tiles-run2.txt; the unpack costs a K step more than the bytes it saves), so the tuner does
    not offer it: a memory option.
    w_tma (int8_fused, not packed): the weight's K steps come through a tensor descriptor (TMA
    straight into shared memory: no address per element, no copies issued per thread) instead
    of pointer loads. On the H200 it paid where each thread had many bytes of weight to copy per
    step, in a K loop (8x5760x2880, 16 x 128 tiles of 8-block steps on 4 warps: 17.3 -> 15.5 us),
    and lost elsewhere (docs/results/s12/wtma-run3.txt). A one-step segment with it runs as a
    pipelined loop of one iteration (:func:`mxfp4.kernels.fused._segment_loop`), which waits for
    the tile after the fold only with num_stages >= 2 (with 1, right after issuing it); that
    paid where a thread copies >= 512 bytes (docs/results/s13/loopstep-run1.txt).
    """

    block_m: int = 16
    block_n: int = 64
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3
    blocks_per_step: int = 1
    kernel: str = "persistent"
    fold_blocks: int = 0
    packed: bool = False
    w_tma: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "split_k", "num_warps", "num_stages", "blocks_per_step"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"KernelConfig.{name} must be a positive int, got {value!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"KernelConfig.kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.kernel == "direct":
            if self.blocks_per_step > 64 or self.blocks_per_step & (self.blocks_per_step - 1):
                raise ValueError("KernelConfig.blocks_per_step must be a power of two <= 64 for the direct "
                                 f"kernel, got {self.blocks_per_step}")
        elif self.kernel in ("int8", "int8_meet"):
            if self.blocks_per_step not in (1, 2, 4, 8):
                raise ValueError(f"the {self.kernel} kernel needs blocks_per_step in (1, 2, 4, 8), got {self.blocks_per_step}")
            if self.split_k > 1 and self.fold_blocks:
                raise ValueError(f"the {self.kernel} kernel's split-K makes each split one fold segment: fold_blocks must "
                                 f"be 0 with split_k > 1, got {self.fold_blocks}")
            if not isinstance(self.fold_blocks, int) or self.fold_blocks < 0 or self.fold_blocks % self.blocks_per_step:
                raise ValueError("KernelConfig.fold_blocks must be 0 (all of K) or a positive multiple of "
                                 f"blocks_per_step ({self.blocks_per_step}), got {self.fold_blocks!r}")
        elif self.kernel == "int8_fused":
            if self.blocks_per_step not in (1, 2, 4, 8, 16):
                raise ValueError("the int8_fused kernel needs blocks_per_step in (1, 2, 4, 8, 16), got "
                                 f"{self.blocks_per_step}")
            if self.fold_blocks:
                raise ValueError("the int8_fused kernel folds over each split (all of K without split-K): "
                                 f"fold_blocks must be 0, got {self.fold_blocks!r}")
        elif self.blocks_per_step not in (1, 2, 4, 8):
            raise ValueError(f"KernelConfig.blocks_per_step must be 1, 2, 4 or 8, got {self.blocks_per_step}")
        if self.kernel not in ("int8", "int8_meet") and self.fold_blocks != 0:
            raise ValueError(f"KernelConfig.fold_blocks applies to the int8 kernels only, got {self.fold_blocks!r}")
        if not isinstance(self.packed, bool):
            raise ValueError(f"KernelConfig.packed must be a bool, got {self.packed!r}")
        if self.packed and not self.kernel.startswith("int8"):
            raise ValueError(f"KernelConfig.packed applies to the int8 kernels only, got kernel {self.kernel!r}")
        if self.packed and self.blocks_per_step % 2:
            raise ValueError("KernelConfig.packed needs an even blocks_per_step (K steps of whole 64-element runs "
                             f"of packed codes), got {self.blocks_per_step}")
        if not isinstance(self.w_tma, bool):
            raise ValueError(f"KernelConfig.w_tma must be a bool, got {self.w_tma!r}")
        if self.w_tma and (self.kernel != "int8_fused" or self.packed):
            raise ValueError("KernelConfig.w_tma applies to the int8_fused kernel's int8 weight only, got kernel "
                             f"{self.kernel!r}{' with packed' if self.packed else ''}")
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            least = 1 if name == "block_m" and self.kernel == "int8_fused" else 16
            if value < least or value & (value - 1):
                raise ValueError(f"KernelConfig.{name} must be a power of two >= {least}"
                                 f"{' for the ' + self.kernel + ' kernel' if least == 1 else ''}, got {value}")
        if self.num_warps & (self.num_warps - 1) or self.num_warps > 16:
            raise ValueError(f"KernelConfig.num_warps must be a power of two <= 16, got {self.num_warps}")

    @property
    def launches(self) -> int:
        """Kernel launches per call: 2 for "int8" (the A fold, then the GEMM), else 1."""
        return 2 if self.kernel == "int8" else 1

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "KernelConfig":
        if d.get("scale_mma") is False:  # tables written before the option was removed
            d = {key: value for key, value in d.items() if key != "scale_mma"}
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - fields
        if unknown:
            raise ValueError(f"unknown KernelConfig fields: {sorted(unknown)}")
        return cls(**d)


def pow2_at_least(x: int, lo: int = 1) -> int:
    """The smallest power of two >= x, and at least lo."""
    return max(lo, 1 << max(0, math.ceil(math.log2(max(1, x)))))


def fused_steps(blocks: int, split: int, rows: int) -> list[tuple[int, int]]:
    """(blocks per K step, blocks per segment) choices for the one-launch int8 kernel on K = 32 *
    blocks cut into exactly ``split`` segments of ``rows`` A rows: a segment in one step where it
    is at most 16 blocks, else steps of 8 blocks, or 4 where 8 cannot make ``split`` segments; a
    step's A at most 8192 elements (registers). Where that is one step of 16 blocks, also four
    steps of 4: on 16x2112x7168 (14 segments of 16 blocks) those beat the one step, 15.2 against
    18.9 us (docs/results/s11/configs-run1.txt, s9/trials-run7-fused.csv). Empty when no step
    size makes exactly ``split`` segments."""
    per = -(-blocks // split)
    for step in ((pow2_at_least(per),) if per <= 16 else ()) + (8, 4):
        step = min(step, 256 // rows)
        seg = -(-per // step) * step
        if -(-blocks // seg) == split:
            return [(step, seg), (4, seg)] if step == seg == 16 else [(step, seg)]
    return []


def fused_step(blocks: int, split: int, rows: int) -> tuple[int, int] | None:
    """The first of :func:`fused_steps` (the fewest, widest steps), or None when no step size
    makes exactly ``split`` segments."""
    steps = fused_steps(blocks, split, rows)
    return steps[0] if steps else None


def heuristic_config(m: int, n: int, k: int, num_sms: int = 132, kernel: str = "auto") -> KernelConfig:
    """A reasonable config for any shape, used when the tuned table has no entry. ``kernel``
    forces "persistent", "int8", "int8_fused" or "int8_meet"; "auto" picks by M, after the H200
    sweeps:

    - M <= 32: the one-launch int8_fused kernel, which beat the persistent and direct kernels on all
      26 tuned shapes of that size (by 5-37 %), with tiles like their winners: 16 rows; at
      K <= 512 32 columns and no split; else 128 columns and split-K to about 1.5 programs per SM
      (at least 4 MX blocks per split); K steps by :func:`fused_step`; 4 warps at M <= 4, else 8.
      Not timed as a heuristic;
    - M >= 33 (K >= 128): the int8 path on 64 x 128 tiles up to M = 512 (split-K only where the
      tiles fill less than a quarter of the SMs and K is long, as on 64x2112x7168; without a
      split 8-block K steps and 4 stages, the M = 64 winners; 64 x 64 tiles where those fit
      one program per SM, as they won 9 of the 11 tuned M = 64 layers, sixth session) and
      128 x 256 above. Two launches (A's fold, then the multiply launched as its programmatic
      dependent: :func:`mxfp4.launch.launch_int8`), which beat the one-launch int8_meet on the
      same tiles on all 26 tuned M = 64 .. 1024 shapes tried (by 0.6-2.0 us, fifteenth session,
      docs/results/s15/); the table keeps int8_meet where it came within the tuner's margin and
      on the benchmark shapes (M = 33 .. 63 untuned). Not timed as a heuristic;
    - else the persistent kernel.
    """
    if kernel not in ("auto", "persistent", "int8", "int8_fused", "int8_meet"):
        raise ValueError(f"kernel must be 'auto', 'persistent', 'int8', 'int8_fused' or 'int8_meet', got {kernel!r}")
    blocks = max(1, k // 32)
    if kernel == "int8_fused" or (kernel == "auto" and m <= 32):
        block_n = 32 if k <= 512 else 128
        tiles = -(-m // 16) * -(-n // block_n)
        split = 1 if blocks <= 16 else max(1, min(16, blocks // 4, round(1.5 * num_sms / tiles)))
        while fused_step(blocks, split, 16) is None:
            split -= 1
        step, seg = fused_step(blocks, split, 16)
        return KernelConfig(16, block_n, split, 4 if m <= 4 else 8, 1 if seg == step else 3, step, "int8_fused")
    if kernel in ("int8", "int8_meet") or (kernel == "auto" and k >= 128):
        if kernel == "auto":
            kernel = "int8"
        if m > 512:
            return KernelConfig(128, 256, 1, 8, 4, 4, kernel)
        tiles = -(-m // 64) * -(-n // 128)
        split = 1
        while tiles * split * 2 <= num_sms // 2 and blocks >= 64 * split * 2:
            split *= 2
        if split == 1 and blocks >= 16 and m <= 256 and -(-m // 64) * -(-n // 64) <= num_sms:
            return KernelConfig(64, 64, 1, 4, 4, 8, kernel)  # 64 x 128 tiles would leave SMs idle
        if split == 1:
            return KernelConfig(64, 128, 1, 4, 4, 8 if blocks >= 16 else 4, kernel)
        return KernelConfig(64, 128, split, 4, 3, 4, kernel)
    block_m = min(pow2_at_least(m, 16), 64)
    block_n = 64 if m <= 64 else 128
    tiles = -(-m // block_m) * -(-n // block_n)
    split_k = 1
    while tiles * split_k * 2 <= num_sms and blocks // (split_k * 2) >= 4:
        split_k *= 2
    return KernelConfig(block_m, block_n, split_k, 4, 3)


# ---- the tuned table ----------------------------------------------------------------------------

TABLE_FORMAT = 1
NEAR_M = 2.0
"""A tuned entry serves other M of its (n, k) up to this ratio away (else the heuristic)."""


@dataclasses.dataclass(frozen=True)
class TunedTable:
    """Best configs per (m, n, k) for one GPU model, triton version and package version.

    Look-up order: the exact shape, then the same (n, k) at the tuned M nearest to m by ratio
    (the larger on a tie) if at most NEAR_M times m or 1 / NEAR_M of it, else None (the caller
    falls back to :func:`heuristic_config`, which follows M).
    """

    gpu: str
    triton: str
    package: str
    entries: tuple[tuple[tuple[int, int, int], KernelConfig], ...]

    @functools.cached_property
    def _index(self) -> tuple[dict, dict]:
        """(shape -> config, (n, k) -> [(m, config)]), built on first look-up."""
        by_nk: dict[tuple[int, int], list] = {}
        for (m, n, k), cfg in self.entries:
            by_nk.setdefault((n, k), []).append((m, cfg))
        return dict(self.entries), by_nk

    def lookup(self, m: int, n: int, k: int) -> KernelConfig | None:
        by_shape, by_nk = self._index
        if (m, n, k) in by_shape:
            return by_shape[(m, n, k)]
        # the tuned M nearest by ratio (the larger on a tie), if within NEAR_M: a tile tuned for
        # 512 rows gave 28 programs at M = 128 (128x7168x2048: 23 us against cuBLAS bf16's 15)
        ratio = lambda mm: max(m, mm) / max(1, min(m, mm))  # noqa: E731
        near = min(by_nk.get((n, k), ()), key=lambda row: (ratio(row[0]), -row[0]), default=None)
        return near[1] if near is not None and ratio(near[0]) <= NEAR_M else None

    def to_json(self) -> dict:
        return {"format": TABLE_FORMAT, "gpu": self.gpu, "triton": self.triton, "package": self.package,
                "entries": [{"m": m, "n": n, "k": k, "config": cfg.to_dict()} for (m, n, k), cfg in self.entries]}

    @classmethod
    def from_json(cls, d: dict) -> "TunedTable":
        if not isinstance(d, dict) or d.get("format") != TABLE_FORMAT:
            raise ValueError(f"not a format-{TABLE_FORMAT} tuned table")
        entries = []
        for e in d["entries"]:
            shape = (int(e["m"]), int(e["n"]), int(e["k"]))
            entries.append((shape, KernelConfig.from_dict(e["config"])))
        return cls(str(d["gpu"]), str(d["triton"]), str(d["package"]), tuple(entries))

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically (a temporary file in the same folder, then a rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_json(), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)


def load_table(path: str | os.PathLike) -> TunedTable:
    """Read a tuned table; raises ValueError if it is not one."""
    try:
        with open(path) as f:
            return TunedTable.from_json(json.load(f))
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read tuned table {path}: {exc}") from exc


SHIPPED_TABLES = {"NVIDIA H200": "h200.json"}
"""GPU model name (as torch reports it) -> table file under mxfp4/configs."""


def table_matches(table: TunedTable, gpu: str, triton_version: str) -> str | None:
    """Why ``table`` does not apply here (None if it does): another GPU or triton version."""
    if table.gpu != gpu:
        return f"the table is for {table.gpu!r}, this GPU is {gpu!r}"
    if table.triton.split(".")[:2] != triton_version.split(".")[:2]:
        return f"the table was tuned with triton {table.triton}, this is triton {triton_version}"
    return None


class TableCache:
    """Shipped tables, loaded on first use per GPU model. A missing, corrupt or foreign table is
    ignored with one warning (per GPU model), and the heuristic config is used instead."""

    def __init__(self) -> None:
        self._tables: dict[str, TunedTable | None] = {}

    def for_device(self, gpu: str, triton_version: str) -> TunedTable | None:
        if gpu not in self._tables:
            self._tables[gpu] = self._load(gpu, triton_version)
        return self._tables[gpu]

    @staticmethod
    def _load(gpu: str, triton_version: str) -> TunedTable | None:
        name = SHIPPED_TABLES.get(gpu)
        if name is None:
            return None
        path = Path(__file__).parent / "configs" / name
        try:
            table = load_table(path)
        except ValueError as exc:
            warnings.warn(f"mxfp4: ignoring the tuned table: {exc}; using heuristic configs", stacklevel=3)
            return None
        reason = table_matches(table, gpu, triton_version)
        if reason:
            warnings.warn(f"mxfp4: ignoring the tuned table {path.name}: {reason}; using heuristic configs",
                          stacklevel=3)
            return None
        return table


def choose_config(m: int, n: int, k: int, table: TunedTable | None, num_sms: int = 132) -> KernelConfig:
    """The table's config for (m, n, k), else the heuristic one."""
    cfg = table.lookup(m, n, k) if table is not None else None
    return cfg if cfg is not None else heuristic_config(m, n, k, num_sms)
