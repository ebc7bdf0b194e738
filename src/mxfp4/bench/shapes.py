"""Named GEMM shape sets for the benchmark, and parsing of ``m,n,k`` arguments.

A shape is C[M, N] = A[M, K] @ W[N, K]^T with W in MXFP4. Each carries the seed its inputs are
drawn with: the task's seed where the task gives one, else one derived from (m, n, k).
"""
from __future__ import annotations

import dataclasses

from .. import task

M_BUCKETS = (1, 8, 16, 32, 64, 512, 4096, 8192)
"""Token counts for the model sets: decode (1, 8, 16, 32), small batches (64, 512), prefill (4096, 8192)."""

# Representative projection shapes (N, K), not an exhaustive layer list. DeepSeek-R1 (hidden 7168,
# q_lora 1536, kv_lora 512, 128 heads) with the attention and dense-MLP weights sharded 8 ways
# unless named "full", as an 8-GPU server holds them.
DEEPSEEK_NK = (
    ("q_a+kv_a fused", 2112, 7168),
    ("q_b /8", 3072, 1536),
    ("q_b full", 24576, 1536),
    ("kv_b /8", 4096, 512),
    ("o_proj /8", 7168, 2048),
    ("mlp gate_up /8", 4608, 7168),
    ("mlp down /8", 7168, 2304),
)

# GPT-OSS-120B (hidden 2880, 64 query heads and 8 KV heads of 64, expert width 2880), unsharded.
GPTOSS_NK = (
    ("qkv", 5120, 2880),
    ("o_proj", 2880, 4096),
    ("expert gate_up", 5760, 2880),
    ("expert down", 2880, 2880),
)

# Llama-3.3-70B (hidden 8192, intermediate 28672, 64 query heads and 8 KV heads of 128), unsharded:
# the AMD Quark MXFP4 export's projections, q/k/v and gate/up fused as serving engines run them.
LLAMA70B_NK = (
    ("qkv", 10240, 8192),
    ("o_proj", 8192, 8192),
    ("gate_up", 57344, 8192),
    ("down", 8192, 28672),
)

# Llama-3.1-405B (hidden 16384, intermediate 53248, 128 query heads and 8 KV heads of 128), each
# projection sharded 8 ways by tensor parallelism (column-parallel N / 8, row-parallel K / 8).
LLAMA405B_TP8_NK = (
    ("qkv /8", 2304, 16384),
    ("o_proj /8", 16384, 2048),
    ("gate_up /8", 13312, 16384),
    ("down /8", 16384, 6656),
)

LARGE_MNK = ((1024, 7168, 2048), (4096, 7168, 7168), (8192, 8192, 8192))


@dataclasses.dataclass(frozen=True)
class Shape:
    """One benchmark problem: sizes, input seed, and where it comes from (``group``)."""

    m: int
    n: int
    k: int
    seed: int
    group: str = "custom"

    def __post_init__(self) -> None:
        for name in ("m", "n", "k", "seed"):
            value = getattr(self, name)
            low = 0 if name == "seed" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"Shape.{name} must be an int >= {low}, got {value!r}")
        if self.k % 64:
            raise ValueError(f"k must be a multiple of 64 (32-element blocks, two codes a byte), got {self.k}")
        if self.n % 16:
            raise ValueError(f"n must be a multiple of 16 (the (16, 16) weight shuffle), got {self.n}")

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def bytes_moved(self) -> int:
        """Bytes the A4W4 GEMM must move: A bf16, W fp4, W's e8m0 scales, C bf16."""
        return self.m * self.k * 2 + self.n * self.k // 2 + self.n * self.k // 32 + self.m * self.n * 2


def derived_seed(m: int, n: int, k: int) -> int:
    """A fixed seed for a shape the task does not list (same shape, same inputs, every run)."""
    return (m * 1_000_003 + n * 10_007 + k * 101) % (2 ** 31 - 1) + 1


def make_shape(m: int, n: int, k: int, group: str = "custom", seed: int | None = None) -> Shape:
    return Shape(m, n, k, derived_seed(m, n, k) if seed is None else seed, group)


def _model_set(name: str, nk: tuple) -> tuple[Shape, ...]:
    return tuple(make_shape(m, n, k, f"{name} {layer}") for layer, n, k in nk for m in M_BUCKETS)


SHAPE_SETS = {
    "bench": lambda: tuple(Shape(m, n, k, s, "task bench") for m, n, k, s in task.BENCHMARK_SHAPES),
    "test": lambda: tuple(Shape(m, n, k, s, "task test") for m, n, k, s in task.TEST_SHAPES),
    "deepseek": lambda: _model_set("deepseek", DEEPSEEK_NK),
    "gptoss": lambda: _model_set("gptoss", GPTOSS_NK),
    "llama70b": lambda: _model_set("llama70b", LLAMA70B_NK),
    "llama405b": lambda: _model_set("llama405b tp8", LLAMA405B_TP8_NK),
    "large": lambda: tuple(make_shape(m, n, k, "large") for m, n, k in LARGE_MNK),
    "all": lambda: tuple(s for name in ("bench", "test", "deepseek", "gptoss", "llama70b", "llama405b", "large")
                         for s in SHAPE_SETS[name]()),
}
"""Shape set name -> function returning its shapes; "bench" is the default."""


def shape_set(name: str) -> tuple[Shape, ...]:
    """The shapes of a named set (see :data:`SHAPE_SETS`)."""
    if name not in SHAPE_SETS:
        raise ValueError(f"unknown shape set {name!r}; choose from {', '.join(SHAPE_SETS)}")
    return SHAPE_SETS[name]()


def parse_shape(text: str) -> Shape:
    """``"m,n,k"`` or ``"m,n,k,seed"`` (also ``x``-separated) -> :class:`Shape`."""
    parts = text.replace("x", ",").replace("X", ",").split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"shape {text!r} must be m,n,k or m,n,k,seed with integers") from None
    if len(values) not in (3, 4):
        raise ValueError(f"shape {text!r} must be m,n,k or m,n,k,seed")
    return make_shape(*values[:3], seed=values[3] if len(values) == 4 else None)


def parse_shapes(items: list[str] | tuple[str, ...]) -> tuple[Shape, ...]:
    """Parse ``--shapes`` arguments; each item may itself hold several shapes separated by spaces."""
    shapes = tuple(parse_shape(tok) for item in items for tok in item.split())
    if not shapes:
        raise ValueError("no shapes given")
    return shapes
