"""Kernel configurations, the tuned table, and the heuristic default."""
from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Tile shape and launch options of the one-launch A4W4 kernel; validated on construction.

    block_m, block_n: output tile (each >= 16, powers of two); K advances one MX block (32) per
    step. split_k: work items sharing one output tile along K, reduced inside the launch by the
    last to arrive. num_warps, num_stages: Triton launch options (stages of the K pipeline).
    """

    block_m: int = 16
    block_n: int = 64
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "split_k", "num_warps", "num_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"KernelConfig.{name} must be a positive int, got {value!r}")
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            if value < 16 or value & (value - 1):
                raise ValueError(f"KernelConfig.{name} must be a power of two >= 16, got {value}")
        if self.num_warps & (self.num_warps - 1) or self.num_warps > 16:
            raise ValueError(f"KernelConfig.num_warps must be a power of two <= 16, got {self.num_warps}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "KernelConfig":
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - fields
        if unknown:
            raise ValueError(f"unknown KernelConfig fields: {sorted(unknown)}")
        return cls(**d)


def _pow2_at_least(x: int, lo: int) -> int:
    return max(lo, 1 << max(0, math.ceil(math.log2(max(1, x)))))


def heuristic_config(m: int, n: int, k: int, num_sms: int = 132) -> KernelConfig:
    """A reasonable config for any shape, used when the tuned table has no entry."""
    block_m = min(_pow2_at_least(m, 16), 64)
    block_n = 64 if m <= 64 else 128
    tiles = -(-m // block_m) * -(-n // block_n)
    blocks = max(1, k // 32)
    split_k = 1
    while tiles * split_k * 2 <= num_sms and blocks // (split_k * 2) >= 4:
        split_k *= 2
    return KernelConfig(block_m, block_n, split_k, 4, 3)
