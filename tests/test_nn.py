"""MXFP4Linear on the CPU: construction errors, forward equals the reference, bytes kept; on a Hopper GPU
(marker gpu) no memory kept between calls, graphs and torch.compile of the layer, a model following
half() and float()."""
import gc

import pytest
import torch
from torch import nn

import mxfp4
from mxfp4 import reference, task
from mxfp4.nn import MXFP4Linear
from mxfp4.tensor import LAYER_DTYPES, Layout, MXFP4Tensor


def test_forward_matches_reference_and_keeps_only_mxfp4_bytes():
    lin = nn.Linear(128, 64, bias=True)
    layer = MXFP4Linear.from_linear(lin)
    x = torch.randn(5, 128).bfloat16()
    want = reference.gemm_a4w4(x, layer.weight, bias=layer.bias)  # the bias before the one rounding
    assert torch.equal(layer(x), want)
    assert not torch.equal(want, reference.gemm_a4w4(x, layer.weight) + layer.bias)  # not rounded twice
    assert layer.kept_bytes() == 64 * 64 + 256 * 8
    state = layer.state_dict()
    again = MXFP4Linear(layer.weight, layer.bias)
    again.load_state_dict(state)
    assert torch.equal(again(x), layer(x))


def test_from_linear_errors_name_the_layer():
    with pytest.raises(TypeError, match="linear must be a torch.nn.Linear"):
        MXFP4Linear.from_linear(None)
    with pytest.raises(ValueError, match=r"linear.in_features \(48\)"):
        MXFP4Linear.from_linear(nn.Linear(48, 16))


class Block(nn.Module):
    """Layers the default filter keeps and drops: K % 32, and the output head."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(128, 64, bias=True)
        self.odd_k = nn.Linear(96, 32)      # K % 64 != 0: padded in prepare
        self.odd_n = nn.Linear(64, 40)      # N % 16 != 0: padded in prepare
        self.not_blocks = nn.Linear(48, 16)  # K % 32 != 0: no MX blocks, kept
        self.inner = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.lm_head = nn.Linear(64, 32)


def test_quantize_default_filter_swaps_every_blocked_layer_but_the_head():
    torch.manual_seed(0)
    model = Block()
    up, odd_n = model.up, model.odd_n
    mxfp4.quantize_(model)
    swapped = sorted(n for n, m in model.named_modules() if isinstance(m, MXFP4Linear))
    assert swapped == ["inner.0", "odd_k", "odd_n", "up"]
    assert type(model.not_blocks) is nn.Linear and type(model.lm_head) is nn.Linear
    x = torch.randn(3, 128).bfloat16()
    assert torch.equal(model.up(x), MXFP4Linear.from_linear(up, dtype=torch.float32)(x))
    y = model.odd_n(x[:, :64])
    assert y.shape == (3, 40) and y.is_contiguous()
    want = reference.gemm_a4w4(x[:, :64], mxfp4.quantize(odd_n.weight.detach()), bias=model.odd_n.bias)
    assert y.dtype is torch.float32 and torch.equal(y, want.float())  # a float32 layer: the bf16 result converted


def test_quantize_filter_and_its_errors_leave_the_model_unchanged():
    model = Block()
    mxfp4.quantize_(model, lambda m, name: name == "odd_k")
    assert [n for n, m in model.named_modules() if isinstance(m, MXFP4Linear)] == ["odd_k"]

    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(48, 16))
    with pytest.raises(ValueError, match=r"layer '1': in_features \(48\) must be a multiple of 32"):
        mxfp4.quantize_(model, lambda m, name: True)
    assert [type(m) for m in model] == [nn.Linear, nn.Linear]
    with pytest.raises(TypeError, match="is itself an nn.Linear"):
        mxfp4.quantize_(nn.Linear(64, 64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16])
def test_quantize_follows_the_models_dtype_and_half_or_to_change_it(dtype):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 40)).to(dtype)
    mxfp4.quantize_(model)
    assert all(isinstance(m, MXFP4Linear) for m in (model[0], model[2]))
    x = torch.randn(3, 128, dtype=dtype)
    y = model(x)
    assert y.dtype == dtype and model[0].bias.dtype == dtype
    want = reference.gemm_a4w4(x, model[0].weight, bias=model[0].bias).to(dtype)  # round_bf16(exact + b), converted
    assert torch.equal(model[0](x), want)
    for other, make in ((torch.float16, lambda m: m.half()), (torch.float32, lambda m: m.float()),
                        (torch.bfloat16, lambda m: m.to(torch.bfloat16))):
        make(model)
        assert model(torch.randn(2, 128, dtype=other)).dtype == other and model[2].dtype == other
    assert "dtype=torch.bfloat16" in repr(model[0])


def test_dtype_is_checked():
    w = mxfp4.quantize(torch.randn(16, 64))
    with pytest.raises(TypeError, match="dtype must be torch.bfloat16, float16 or float32"):
        MXFP4Linear(w, dtype=torch.float64)


def test_a_layer_under_two_names_becomes_one_mxfp4_layer_under_both():
    torch.manual_seed(0)
    model = nn.Module()
    model.a = nn.Linear(64, 32)
    model.b = model.a
    model.inner = nn.Sequential(model.a)  # a third name, one level down
    mxfp4.quantize_(model)
    assert isinstance(model.a, MXFP4Linear) and model.b is model.a and model.inner[0] is model.a
    x = torch.randn(3, 64).bfloat16()
    assert torch.equal(model.a(x), model.b(x))

    model = nn.Module()
    model.a = nn.Linear(64, 32)
    model.lm_head = model.a  # the default filter keeps lm_head bf16 and would swap a
    with pytest.raises(ValueError, match="layer 'a' is also the model's 'lm_head'.*filter_fn does not select"):
        mxfp4.quantize_(model)
    assert type(model.a) is nn.Linear and model.lm_head is model.a


def test_a_layer_of_another_dtype_is_refused_before_any_swap():
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 32).double())
    with pytest.raises(ValueError, match=r"layer '1' is torch.float64: an MXFP4Linear's dtype is bfloat16"):
        mxfp4.quantize_(model)
    assert [type(m) for m in model] == [nn.Linear, nn.Linear]


def _layers():
    """One of each module that holds MXFP4 bytes: a linear layer, an experts module, a column-parallel shard."""
    from mxfp4 import moe
    from mxfp4.distributed import ColumnParallelMXFP4Linear

    torch.manual_seed(0)
    mlps = nn.ModuleList(nn.Module() for _ in range(2))
    for m in mlps:
        m.gate_proj, m.up_proj = nn.Linear(64, 32, bias=False), nn.Linear(64, 32, bias=False)
        m.down_proj, m.act_fn = nn.Linear(32, 64, bias=False), nn.SiLU()
    w = mxfp4.quantize(torch.randn(32, 64))
    return {"MXFP4Linear": (MXFP4Linear(w, torch.zeros(32)), LAYER_DTYPES),
            "MXFP4Experts": (moe.from_module(mlps), LAYER_DTYPES),
            "ColumnParallelMXFP4Linear": (ColumnParallelMXFP4Linear.from_mxfp4(w, rank=0, world_size=1),
                                          (torch.bfloat16,))}


ALL_DTYPES = [d for d in vars(torch).values() if isinstance(d, torch.dtype)]


@pytest.mark.filterwarnings("ignore:Complex modules are a new feature", "ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("name", ["MXFP4Linear", "MXFP4Experts", "ColumnParallelMXFP4Linear"])
def test_every_dtype_of_to_and_type_is_taken_or_refused_before_a_change(name):
    """.to(dtype) (and .half(), .double(), ...) of every torch dtype, and .type(dtype): a float dtype the layer
    computes in becomes its dtype with the bytes still uint8; anything else is a TypeError and nothing changed."""
    layer, allowed = _layers()[name]
    bytes_before = {k: v.clone() for k, v in layer.state_dict().items() if v.dtype is torch.uint8}
    for dtype in ALL_DTYPES:
        for how in ("to", "type"):
            start = getattr(layer, "dtype", None)
            state = {k: v.dtype for k, v in layer.state_dict().items()}
            try:
                getattr(layer, how)(dtype)
            except (TypeError, ValueError, RuntimeError) as e:
                if dtype in allowed and how == "to":
                    raise AssertionError(f"{name}.to({dtype}) refused: {e}") from e
                assert {k: v.dtype for k, v in layer.state_dict().items()} == state, f"{name}: {dtype} changed it"
                assert start is None or layer.dtype == start
                continue
            assert dtype in allowed, f"{name}.{how}({dtype}) was taken"
            assert all(layer.state_dict()[k].dtype is torch.uint8 for k in bytes_before)
    assert all(torch.equal(layer.state_dict()[k], v) for k, v in bytes_before.items())
    with pytest.raises(TypeError, match=rf"{name}'s dtype \(its output's and bias's\) must be one of"):
        layer.double()

# ---- on a Hopper GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(16, 2112, 7168), (256, 3072, 1536), (4096, 7168, 7168)])
def test_nothing_kept_between_calls(m, n, k):
    data = task.generate_input(m, n, k, 1, "cuda")
    layer = MXFP4Linear.from_mxfp4(MXFP4Tensor(data[3], data[4], (n, k), Layout.AITER_SHUFFLED))
    outs = [task.custom_kernel(data), layer(data[0])]
    torch.cuda.synchronize()
    # An earlier test's cyclic garbage (a captured graph, a compiled module) freed by the collector inside the
    # loop would move memory_allocated by its own bytes: collect it first, and let no collection run between
    # the two readings.
    gc.collect()
    gc.disable()
    try:
        for fn in (lambda: task.custom_kernel(data), lambda: layer(data[0])):
            for _ in range(3):
                before = torch.cuda.memory_allocated()
                outs.append(fn())
                torch.cuda.synchronize()
                assert torch.cuda.memory_allocated() - before == m * n * 2  # the output alone
    finally:
        gc.enable()
    assert layer.kept_bytes() == data[3].numel() + data[4].numel()


@pytest.mark.gpu
@pytest.mark.parametrize("m", [32, 256])  # the mma.sync kernel, the large-M kernel (two launches)
def test_prepared_module_graph_and_compile(m):
    data = task.generate_input(m, 3072, 1536, 45, "cuda")
    layer = MXFP4Linear.from_mxfp4(MXFP4Tensor(data[3], data[4], (3072, 1536), Layout.AITER_SHUFFLED))
    a = data[0]
    want = task.custom_kernel(data)
    assert torch.equal(layer(a), want)
    assert torch.equal(torch.compile(layer, fullgraph=True)(a), want)
    static = a.clone()
    layer(static)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = layer(static)
    static.copy_(a)
    g.replay()
    assert torch.equal(out, want)


@pytest.mark.gpu
def test_model_follows_half_and_float():
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 40)).cuda()
    mxfp4.quantize_(model)
    for dtype in (torch.float16, torch.float32, torch.bfloat16):
        model.to(dtype)
        y = model(torch.randn(3, 128, device="cuda", dtype=dtype))
        assert y.dtype == dtype and torch.isfinite(y).all()
