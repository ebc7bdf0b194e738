"""A checkpoint loaded per rank (``quantize_(..., tp=TensorParallel(...))``), gloo in 2 and 4 processes.

A small MLP model whose shapes shard unevenly (hidden 352 = 11 blocks, intermediate 736 = 23 units)
is quantized and saved here; each worker builds it on the meta device, loads its shard of every
MXFP4 weight and records every byte range it reads from the files. Checked here: each rank read
exactly its rows or columns of every sharded weight and its scales (nothing else of them), keeps
just its shard's bytes, and its outputs equal the one-process model's bit for bit (CPU reference;
the row-parallel layers promise the kernels' bound, and their float32 partials round as the exact
product here, as on nearly every output: tests/test_distributed.py).
"""
import pathlib

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import mxfp4
from mxfp4 import distributed as tp
from mxfp4.checkpoint import safetensors as st
from mxfp4.tensor import prepare

HIDDEN, INTER, LAYERS = 352, 736, 2
RULES = {"*.gate_proj": "column", "*.up_proj": "column", "*.down_proj": "row"}
MS = (1, 5)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTER, bias=True)
        self.down_proj = nn.Linear(INTER, HIDDEN, bias=True)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)  # no rule: replicated, loaded whole

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (nn.functional.silu(self.gate_proj(x).float()) * self.up_proj(x).float()).bfloat16()
        return x + self.o_proj(self.down_proj(h))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.lm_head = nn.Linear(HIDDEN, 64, bias=False)  # kept in bf16 (excluded by save)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.layers:
            x = block(x)
        return self.lm_head(x)


def _inputs() -> dict:
    gen = torch.Generator().manual_seed(3)
    return {m: torch.randn(m, HIDDEN, generator=gen).bfloat16() for m in MS}


def _meta_model() -> Model:
    with torch.device("meta"):
        return Model().to(torch.bfloat16)


def _worker(rank: int, world: int, init_file: str, ckpt: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        reads = []
        plain_read = st._read_into

        def recording(f, offset, buf, info, name):
            reads.append((name, offset, buf.numel()))
            plain_read(f, offset, buf, info, name)

        st._read_into = recording
        model = mxfp4.quantize_(_meta_model(), checkpoint=ckpt, device="cpu", tp=tp.TensorParallel(RULES))
        st._read_into = plain_read
        kept = {name: m.kept_bytes() for name, m in model.named_modules() if hasattr(m, "kept_bytes")}
        kinds = {name: type(m).__name__ for name, m in model.named_modules() if hasattr(m, "kept_bytes")}
        with torch.no_grad():
            out = {m: model(x) for m, x in _inputs().items()}
        torch.save({"reads": reads, "kept": kept, "kinds": kinds, "out": out}, pathlib.Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.manual_seed(0)
    model = mxfp4.quantize_(Model().to(torch.bfloat16))
    path = mxfp4.save(model, tmp_path_factory.mktemp("tp_ckpt"), max_shard_size=300_000)  # several files
    one = mxfp4.quantize_(_meta_model(), checkpoint=path, device="cpu")
    with torch.no_grad():
        want = {m: one(x) for m, x in _inputs().items()}
    return path, one, want


@pytest.fixture(scope="module", params=(2, 4), ids=lambda w: f"world{w}")
def run(request, saved, tmp_path_factory):
    world = request.param
    tmp = tmp_path_factory.mktemp(f"tpload{world}")
    mp.spawn(_worker, args=(world, str(tmp / "init"), str(saved[0]), str(tmp)), nprocs=world, join=True)
    return world, [torch.load(tmp / f"rank{r}.pt") for r in range(world)]


def _shard_bytes(info: st.TensorInfo, rows: tuple[int, int], cols: tuple[int, int]) -> set[tuple[int, int]]:
    """The (offset, length) byte ranges of rows x cols of a 2-D uint8 tensor, one per row (merged when whole)."""
    width = info.shape[1]
    if cols == (0, width):
        return {(info.offset + rows[0] * width, (rows[1] - rows[0]) * width)}
    return {(info.offset + r * width + cols[0], cols[1] - cols[0]) for r in range(*rows)}


def test_each_rank_reads_only_its_shard_of_every_mxfp4_weight(saved, run):
    path, one, _ = saved
    world, ranks = run
    ckpt = mxfp4.load(path)
    sharded = 0
    for rank, got in enumerate(ranks):
        reads = {}
        for name, offset, n in got["reads"]:
            reads.setdefault(name, set()).add((offset, n))
        for name, m in one.named_modules():
            if not isinstance(m, mxfp4.nn.MXFP4Linear):
                continue
            style = tp.TensorParallel(RULES).style(name)
            n, k = m.out_features, m.in_features
            for suffix, per in ((".weight", 2), (".weight_scale", 32)):
                info = ckpt.tensors[name + suffix]
                if style == "column":
                    a, b = tp.shard_range(n, rank, world)
                    want = _shard_bytes(info, (a, b), (0, k // per))
                elif style == "row":
                    a, b = tp.shard_range(k, rank, world)
                    want = _shard_bytes(info, (0, n), (a // per, b // per))
                else:
                    want = {(info.offset, info.nbytes)}
                assert reads[name + suffix] == want, (rank, name + suffix)
                sharded += style is not None
    assert sharded == 2 * 3 * LAYERS * world


def test_each_rank_keeps_its_shards_bytes(saved, run):
    _, one, _ = saved
    world, ranks = run
    for rank, got in enumerate(ranks):
        for name, m in one.named_modules():
            if not isinstance(m, mxfp4.nn.MXFP4Linear):
                continue
            style = tp.TensorParallel(RULES).style(name)
            if style is None:
                assert got["kinds"][name] == "MXFP4Linear" and got["kept"][name] == m.kept_bytes()
                continue
            shard = (tp.shard_columns if style == "column" else tp.shard_rows)(m.weight, rank, world)
            want = prepare(shard)
            assert got["kinds"][name] == ("ColumnParallelMXFP4Linear" if style == "column" else
                                          "RowParallelMXFP4Linear")
            assert got["kept"][name] == want.data.numel() + want.scales.numel(), (rank, name)
            # the shard's own codes and scales, plus the layout's padding (rows to 16 and 256, K to 64)
            n, k = shard.shape
            assert got["kept"][name] <= (n + 15) * (k + 63) // 2 + (n + 255) * (k // 32 + 8)
            assert got["kept"][name] < m.kept_bytes()


def test_outputs_equal_the_one_process_model_on_every_rank(saved, run):
    _, _, want = saved
    _, ranks = run
    for rank, got in enumerate(ranks):
        for m, y in want.items():
            assert torch.equal(got["out"][m].view(torch.int16), y.view(torch.int16)), (rank, m)


def test_tp_errors_name_the_argument_and_rule(saved):
    path = saved[0]
    with pytest.raises(ValueError, match=r"TensorParallel.rules\['\*.up_proj'\] = 'col'"):
        tp.TensorParallel({"*.up_proj": "col"}, rank=0, world_size=2)
    with pytest.raises(ValueError, match=r"layer 'lm_head': tp= shards it \(column\), but the checkpoint keeps it "
                                         r"unquantized"):
        mxfp4.quantize_(_meta_model(), checkpoint=path, tp=tp.TensorParallel({"*": "column"}, rank=0, world_size=2))
    with pytest.raises(ValueError, match=r"layer 'layers.0.gate_proj' \(column parallel\): N \(out_features\) "
                                         r"\(736\) must hold at least world_size \(32\) units of 32"):
        mxfp4.quantize_(_meta_model(), checkpoint=path, tp=tp.TensorParallel(RULES, rank=0, world_size=32))
    with pytest.raises(TypeError, match="tp= goes with checkpoint="):
        mxfp4.quantize_(Model(), tp=tp.TensorParallel(RULES, rank=0, world_size=2))
