"""mxfp4.gemm_a4w4 (ops.py) on the CPU: argument checks, backend choice, the torch op and gradients. The
kernel path (its logic on the CPU, the kernels on a Hopper GPU): test_ops_kernels.py."""
import pytest
import torch

import mxfp4
from mxfp4 import ops, reference


def operands(m=4, n=32, k=128):
    return torch.randn(m, k).bfloat16(), mxfp4.prepare(mxfp4.quantize(torch.randn(n, k).bfloat16()))


def test_cpu_call_is_the_reference():
    a, w = operands()
    assert torch.equal(mxfp4.gemm_a4w4(a, w), reference.gemm_a4w4(a, w))
    out = torch.empty(4, 32, dtype=torch.bfloat16)
    assert mxfp4.gemm_a4w4(a, w, out) is out


def test_out_aliasing_a_is_rejected():
    a = torch.randn(4, 128).bfloat16()
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(128, 128).bfloat16()))
    with pytest.raises(ValueError, match="out must not overlap a"):
        mxfp4.gemm_a4w4(a, w, out=a)


@pytest.mark.parametrize("bad, err, match", [
    (lambda a, w: (a.float().int(), w), TypeError, "a must be bfloat16"),
    (lambda a, w: (a[:, :64], w), ValueError, "must equal w's K"),
    (lambda a, w: (a, w.data), TypeError, "w must be an MXFP4Tensor"),
    (lambda a, w: (torch.tensor(1.0), w), ValueError, "scalar"),
])
def test_bad_operands(bad, err, match):
    a, w = operands()
    with pytest.raises(err, match=match):
        mxfp4.gemm_a4w4(*bad(a, w))


def test_backend_choice_on_cpu():
    a, w = operands()
    assert ops.select_backend(a, w, "auto") == "reference"
    with pytest.raises(ValueError, match="Hopper"):
        ops.select_backend(a, w, "cuda")
    with pytest.raises(ValueError, match="backend must be one of"):
        ops.select_backend(a, w, "triton")


def test_params_type_checked():
    a, w = operands()
    with pytest.raises(TypeError, match="SmallParams, StreamParams"):
        mxfp4.gemm_a4w4(a, w, params={"bn": 64})


def test_torch_op_and_compile_on_cpu():
    a, w = operands(3, 32, 64)
    got = ops.gemm_a4w4_op(a, w)
    assert torch.equal(got, reference.gemm_a4w4(a, w))
    torch.library.opcheck(torch.ops.mxfp4.gemm_a4w4.default,
                          (a, w.data, w.scales, 32, 64, True, False), test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("n, k", [(1000, 512), (40, 96), (7, 32)])
def test_any_n_and_k_multiple_of_32(n, k):
    a = torch.randn(3, k).bfloat16()
    plain = mxfp4.quantize(torch.randn(n, k).bfloat16())
    w = mxfp4.prepare(plain)
    got = mxfp4.gemm_a4w4(a, w)
    assert got.shape == (3, n) and torch.equal(got, reference.gemm_a4w4(a, plain))
    out = torch.full((3, n), float("nan"), dtype=torch.bfloat16)
    assert mxfp4.gemm_a4w4(a, w, out) is out and torch.equal(out, got)
    assert torch.equal(ops.gemm_a4w4_op(a, w), got)


def test_fp16_and_fp32_activations():
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(32, 128).bfloat16()))
    for dtype in (torch.float16, torch.float32):
        a = torch.randn(4, 128, dtype=dtype)
        assert torch.equal(mxfp4.gemm_a4w4(a, w), reference.gemm_a4w4(a, w))


# ---- autograd: the gradient with respect to a, through the dequantized weight ----------------------

def test_gradient_of_a_is_grad_times_the_dequantized_weight():
    a, w = operands(4, 32, 128)
    a = a.float().requires_grad_()
    y = mxfp4.gemm_a4w4(a, w)
    assert y.requires_grad
    g = torch.randn_like(y, dtype=torch.float32).bfloat16()
    (grad,) = torch.autograd.grad(y, a, g)
    assert grad.dtype == a.dtype
    assert torch.equal(grad, g.float() @ mxfp4.dequantize(w))
    torch.library.opcheck(torch.ops.mxfp4.gemm_a4w4.default, (a, w.data, w.scales, 32, 128, True, False),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_bias_is_checked_and_has_its_gradient():
    a, w = operands(4, 32, 128)
    bias = torch.randn(32)
    for bad, err, match in ((bias.tolist(), TypeError, "bias must be a torch.Tensor, got list"),
                            (bias.to(torch.int32), TypeError,
                             "bias must be bfloat16, float16 or float32, got torch.int32"),
                            (bias[:16], ValueError, r"bias must have shape \(32,\) \(w's N\), got \(16,\)"),
                            (bias.reshape(1, 32), ValueError, r"bias must have shape \(32,\) \(w's N\), got \(1, 32\)"),
                            (bias.to("meta"), ValueError, r"bias \(meta\) must be on a's device \(cpu\)")):
        with pytest.raises(err, match=match):
            mxfp4.gemm_a4w4(a, w, bias=bad)
        with pytest.raises(err, match=match):
            ops.gemm_a4w4_op(a, w, None, bad)
    assert torch.equal(ops.gemm_a4w4_op(a, w, None, bias), reference.gemm_a4w4(a, w, bias=bias))
    a = a.float().requires_grad_()
    bias = bias.bfloat16().requires_grad_()
    y = mxfp4.gemm_a4w4(a.reshape(2, 2, 128), w, bias=bias)
    g = torch.randn(2, 2, 32).bfloat16()
    grad_a, grad_b = torch.autograd.grad(y, (a, bias), g)
    assert torch.equal(grad_a, (g.float() @ mxfp4.dequantize(w)).reshape(4, 128))
    assert grad_b.dtype is torch.bfloat16 and torch.equal(grad_b, g.float().sum((0, 1)).bfloat16())
    (grad_b,) = torch.autograd.grad(mxfp4.gemm_a4w4(a.detach(), w, bias=bias), bias, g.reshape(4, 32))  # bias alone
    assert torch.equal(grad_b, g.float().sum((0, 1)).bfloat16())
    torch.library.opcheck(torch.ops.mxfp4.gemm_a4w4.default, (a, w.data, w.scales, 32, 128, True, False, None, bias),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_the_op_records_no_gradient_where_none_is_asked():
    """Its Autograd kernel runs the implementation itself without grad mode or a grad-requiring a."""
    a, w = operands(4, 32, 128)
    want = reference.gemm_a4w4(a, w)
    args = (w.data, w.scales, 32, 128, True, False)
    assert torch.equal(torch.ops.mxfp4.gemm_a4w4.default(a, *args), want)
    with torch.no_grad():
        y = torch.ops.mxfp4.gemm_a4w4.default(a.float().requires_grad_(), *args, torch.float32)
    assert y.grad_fn is None and not y.requires_grad and y.dtype is torch.float32


def test_the_weight_is_frozen_and_options_are_not_differentiable():
    a, w = operands()
    a.requires_grad_()
    with pytest.raises(ValueError, match="a or bias requires grad: out=, backend= and params="):
        mxfp4.gemm_a4w4(a, w, backend="reference")
    with torch.no_grad():
        assert not mxfp4.gemm_a4w4(a, w, backend="reference").requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        w.data.requires_grad_()


def test_lora_adapter_trains_on_an_mxfp4_base_layer():
    """A rank-4 adapter beside a frozen MXFP4 layer learns a target map on the CPU: the loss falls."""
    from torch import nn

    from mxfp4.nn import MXFP4Linear

    torch.manual_seed(0)
    base = MXFP4Linear.from_linear(nn.Linear(128, 64, bias=False))
    down, up = nn.Linear(128, 4, bias=False), nn.Linear(4, 64, bias=False)
    nn.init.zeros_(up.weight)
    x = torch.randn(32, 128)
    with torch.no_grad():  # a rank-4 change the adapter can represent
        want = base(x) + x @ torch.randn(128, 4) @ torch.randn(4, 64) * 0.05
    opt = torch.optim.Adam([*down.parameters(), *up.parameters()], lr=2e-2)
    losses = []
    for _ in range(30):
        xi = x.clone().requires_grad_()  # the activation's gradient flows through the base layer too
        loss = ((base(xi) + up(down(xi)) - want) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        assert xi.grad is not None and torch.isfinite(xi.grad).all()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    assert not any(p.requires_grad for p in base.parameters())


def test_compile_with_grad_enabled():
    from torch import nn

    from mxfp4.nn import MXFP4Linear

    torch.manual_seed(0)
    model = mxfp4.quantize_(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8)), lambda m, name: name == "0")
    assert isinstance(model[0], MXFP4Linear) and model[0].dtype == torch.float32
    x = torch.randn(4, 64, requires_grad=True)  # a float32 model, as the issue's
    eager = model(x).float().sum()
    (ge,) = torch.autograd.grad(eager, x)
    compiled = torch.compile(model, fullgraph=True)(x).float().sum()
    (gc,) = torch.autograd.grad(compiled, x)
    assert torch.equal(eager, compiled) and torch.allclose(ge, gc)


def test_readme_cpu_snippet_runs_as_written():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    api = text[text.index("## API"):]
    snippet = api[api.index("```python") + len("```python"):]
    snippet = snippet[:snippet.index("```")]
    assert "cuda" not in snippet
    exec(compile(snippet, "README.md", "exec"), {})
