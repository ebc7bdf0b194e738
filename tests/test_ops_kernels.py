"""mxfp4.gemm_a4w4's kernel path: its logic on the CPU, each launch replaced by the reference; on a Hopper GPU
(marker gpu) the case list against the exact oracle, any N and K, fp16 / float32 activations, gradients, the
plan kept per shape, the float32 partial and the bias. Host time per eager call and the padded shapes' times
are benchmarks (``mxfp4 bench --host``, BENCHMARKS.md), not tests."""
import pytest
import torch

import mxfp4
from mxfp4 import ops, plan, reference, testing
from mxfp4.nn import MXFP4Linear
from mxfp4.tensor import MXFP4Tensor

from .cases import CASES, cuda_operands, exact_bf16, kernel_domain, make_case


@pytest.mark.parametrize("n, k", [(1000, 512), (40, 96), (7, 32), (64, 128), (40, 576), (24, 608)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_kernel_path_logic_on_the_cpu(monkeypatch, n, k, dtype):
    """The kernel path's padding, slicing, out= and dtypes, with each launch replaced by the reference
    on the padded problem the kernel would see (its inputs checked as the kernels need them)."""
    import dataclasses

    from mxfp4 import plan
    from mxfp4.cuda import launch
    from mxfp4.cuda import ops as cuda_ops
    from mxfp4.tensor import Layout, MXFP4Tensor

    launched = []

    def kernel(a2, data, scales, out, params):
        n16, k64 = data.shape[0], 2 * data.shape[1]
        assert a2.dtype == dtype and a2.shape[1] == k64 and tuple(out.shape) == (a2.shape[0], n16)  # as given, K padded
        assert out.dtype == (torch.float32 if params.out_f32 else torch.bfloat16)
        assert out.stride(1) == 1 and launch.rows_ok(a2)
        out.copy_(torch.full_like(out, float("nan")))  # poison, then write
        padded = MXFP4Tensor(data, scales, (n16, k64), Layout.AITER_SHUFFLED)
        out.copy_(reference.gemm_a4w4(a2, padded, out_dtype=None if params.out_f32 else torch.bfloat16))
        launched.append(params)

    def stream(a2, data, scales, out, params):  # reads A as given: its dtype, its K (zero blocks to K64)
        n16, k64 = data.shape[0], 2 * data.shape[1]
        assert isinstance(params, plan.StreamParams) and a2.dtype == dtype and a2.shape[1] == k <= k64
        assert out.dtype == (torch.float32 if params.out_f32 else torch.bfloat16) and launch.rows_ok(a2)
        out.copy_(torch.full_like(out, float("nan")))
        padded = MXFP4Tensor(data, scales, (n16, k64), Layout.AITER_SHUFFLED)
        a_pad = torch.nn.functional.pad(a2, (0, k64 - a2.shape[1]))
        out.copy_(reference.gemm_a4w4(a_pad, padded, out_dtype=None if params.out_f32 else torch.bfloat16))
        launched.append(params)

    g = torch.Generator().manual_seed(n + k)
    plain = mxfp4.quantize(torch.randn(n, k, generator=g).bfloat16())
    w = mxfp4.prepare(plain)
    def launch_for(params, m, n16, k64, dtype, device):  # A as the family reads it, the reference
        fake = stream if isinstance(params, plan.StreamParams) else kernel
        operand = cuda_ops.FAMILIES[type(params)].operand
        return lambda a, data, scales, out: fake(operand(a, k64)[0], data, scales, out, params)

    monkeypatch.setattr(cuda_ops, "launch_for", launch_for)
    monkeypatch.setattr(ops, "_launches", {})  # the launches remembered per shape: none of another test's
    monkeypatch.setattr(ops, "cuda_supported", lambda device: True)
    monkeypatch.setattr(ops, "_params", lambda m, n, k, index, out_f32=False: dataclasses.replace(
        plan.heuristic(plan.Problem(m, n, k)), out_f32=out_f32))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    for a in (torch.randn(5, k, generator=g).to(dtype), torch.randn(2, 3, k, generator=g).to(dtype)):
        want = reference.gemm_a4w4(a, plain)
        got = mxfp4.gemm_a4w4(a, w)
        assert got.dtype == torch.bfloat16 and got.shape == want.shape and torch.equal(got, want)
        assert torch.equal(mxfp4.gemm_a4w4(a, w, out_dtype=dtype), want.to(dtype))
        for out_dtype in (torch.bfloat16, dtype):
            out = torch.full(want.shape, float("nan"), dtype=out_dtype)
            assert mxfp4.gemm_a4w4(a, w, out) is out and torch.equal(out, want.to(out_dtype))
        assert torch.equal(ops.gemm_a4w4_op(a, w, dtype), want.to(dtype))
        partial = ops.gemm_a4w4_partial(a, w)  # the float32 variant, its N columns
        exact = reference.gemm_a4w4(a, plain, out_dtype=None)
        assert partial.dtype == torch.float32 and partial.shape == want.shape
        assert torch.equal(partial, exact.to(torch.float32)) and launched[-1].out_f32
        # a bias: the float32 total, the bias added in float32, rounded once (within the stated bound)
        bias = (torch.randn(n, generator=g) * 4).to(dtype)
        out = torch.full(want.shape, float("nan"), dtype=dtype)
        got = mxfp4.gemm_a4w4(a, w, out, bias=bias)
        assert got is out and launched[-1].out_f32
        assert torch.equal(out, ops.add_bias(exact.to(torch.float32), bias, dtype))
        product, magnitude = testing.exact_product(a, plain)
        biased = product + bias.double()
        assert ((out.to(torch.float64) - biased).abs() <= testing.biased_bound(biased, magnitude, k)).all()
    assert len(launched) == 2 * 7
    if dtype is torch.float32:  # a value beyond bf16 (quantized to 2**128): every family reads float32 as given
        a = torch.randn(3, k, generator=g)
        a[1, 0] = 3.4e38
        got = mxfp4.gemm_a4w4(a, w, backend="cuda")  # no warning (a warning from mxfp4 fails the test), no refusal
        assert torch.equal(got, reference.gemm_a4w4(a, plain)) and len(launched) == 15


def test_an_eager_call_builds_its_launch_once(monkeypatch):
    """The launch of a call's shape (M, N16, K64), A's dtype, device and output (bf16 or the float32 total) is
    chosen and built once (``ops._launches``); another M, dtype or output kind gets its own."""
    import dataclasses

    from mxfp4.cuda import ops as cuda_ops

    built = []

    def launch_for(params, m, n16, k64, dtype, device):
        built.append((params, m, dtype))
        return lambda a, data, scales, out: out.zero_()

    monkeypatch.setattr(cuda_ops, "launch_for", launch_for)
    monkeypatch.setattr(ops, "_launches", {})
    monkeypatch.setattr(ops, "cuda_supported", lambda device: True)
    monkeypatch.setattr(ops, "_params", lambda m, n, k, index, out_f32=False: dataclasses.replace(
        plan.heuristic(plan.Problem(m, n, k)), out_f32=out_f32))
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(64, 256).bfloat16()))
    a = torch.randn(4, 256)
    for _ in range(3):
        assert torch.equal(mxfp4.gemm_a4w4(a.bfloat16(), w), torch.zeros(4, 64, dtype=torch.bfloat16))
    assert [(m, dtype) for _, m, dtype in built] == [(4, torch.bfloat16)]
    for _ in range(2):
        mxfp4.gemm_a4w4(a.half(), w)
        ops.gemm_a4w4_partial(a.bfloat16(), w)
        mxfp4.gemm_a4w4(a[:3].bfloat16(), w)
    assert [(m, dtype) for _, m, dtype in built] == [(4, torch.bfloat16), (4, torch.float16), (4, torch.bfloat16),
                                                     (3, torch.bfloat16)]
    assert [p.out_f32 for p, _, _ in built] == [False, False, True, False]


# ---- on a Hopper GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gemm_cases_against_exact(case):
    a, w = make_case(case, "cuda")
    out = mxfp4.gemm_a4w4(a, w).cpu()
    want = exact_bf16(a, w)
    domain = kernel_domain(a, w)
    assert domain.all() or case.kind == "special"  # only the special case leaves it (row 4: 1e38 blocks)
    same = (out.view(torch.int16) == want.view(torch.int16)) | (torch.isnan(out) & torch.isnan(want))
    # within the bound on every element (magnitudes from float64: no cancellation in sum |a w|)
    _, mag = testing.exact_product(a.cpu(), MXFP4Tensor(w.data.cpu(), w.scales.cpu(), w.shape, w.layout))
    exact = want.double()
    ok = torch.isfinite(exact) & torch.isfinite(out.double()) & domain
    bound = testing.ulp_bf16(exact) + testing.kernel_bound(exact, mag, case.k)  # want is rounded: one more ulp
    assert ((out.double() - exact).abs()[ok] <= bound[ok]).all()
    assert torch.equal(torch.isnan(out)[domain], torch.isnan(want)[domain])
    assert torch.equal(torch.isinf(out)[domain], torch.isinf(want)[domain])
    assert same[domain].double().mean().item() >= (1.0 if case.kind == "randn" else 0.98)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(32, 1000, 512), (7, 40, 96), (1, 7, 32), (100, 300, 160), (333, 1000, 544),
                                     (16, 2112, 7136), (64, 2050, 2048)])
def test_any_n_and_k_run_on_the_kernels_exactly(m, n, k):
    a, plain = cuda_operands(m, n, k)
    w = mxfp4.prepare(plain)
    torch.full((m, -(-n // 16) * 16), float("nan"), dtype=torch.bfloat16, device="cuda")  # poison the next block
    out = mxfp4.gemm_a4w4(a, w, backend="cuda")
    assert out.shape == (m, n)
    report = testing.check_gemm(out, a, plain)
    assert report.passed and report.identical_fraction == 1.0, report
    assert torch.equal(out.cpu(), reference.gemm_a4w4(a.cpu(), mxfp4.MXFP4Tensor(
        plain.data.cpu(), plain.scales.cpu(), plain.shape)))
    into = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert mxfp4.gemm_a4w4(a, w, into) is into and torch.equal(into, out)
    layer = MXFP4Linear.from_mxfp4(plain)
    y = layer(a)
    assert y.is_contiguous() and torch.equal(y, out)
    assert torch.equal(torch.ops.mxfp4.gemm_a4w4(a, w.data, w.scales, n, k, True, False), out)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("m, n, k", [(16, 2112, 7168), (256, 3072, 1536), (5, 40, 96), (4, 2880, 512), (16, 5120, 2880),
                                     (64, 7168, 2048), (1024, 7168, 2048)])
def test_fp16_and_fp32_activations_run_on_the_kernels(dtype, m, n, k):
    """Every family reads fp16 and float32 A as it is: the reference's bits (the shapes take the short-K, decode,
    streaming and large-M kernels)."""
    a, plain = cuda_operands(m, n, k, dtype=dtype)
    w = mxfp4.prepare(plain)
    out = mxfp4.gemm_a4w4(a, w, backend="cuda")  # no warning (a warning from mxfp4 fails the test)
    report = testing.check_gemm(out, a, plain)
    assert report.passed and report.identical_fraction == 1.0, report
    assert torch.equal(mxfp4.gemm_a4w4(a, w, out_dtype=dtype), out.to(dtype))


@pytest.mark.gpu
def test_fp32_beyond_bf16_runs_on_the_kernels():
    """A float32 value of magnitude >= 1.75 * 2**127 quantizes to 2**128 (beyond bf16, not beyond the kernels,
    which read float32 A as it is): within the kernels' domain (a small weight scale) the reference's bits."""
    a, plain = cuda_operands(4, 64, 128, dtype=torch.float32)
    a[2, 40] = 3.4e38
    small = mxfp4.quantize(mxfp4.dequantize(plain) * 2.0 ** -40)
    out = mxfp4.gemm_a4w4(a, mxfp4.prepare(small), backend="cuda")
    want = reference.gemm_a4w4(a.cpu(), mxfp4.MXFP4Tensor(small.data.cpu(), small.scales.cpu(), small.shape))
    assert torch.isfinite(want).all() and torch.equal(out.cpu(), want)


@pytest.mark.gpu
def test_gradient_on_the_kernels_and_compile_with_grad():
    a, plain = cuda_operands(16, 256, 512)
    layer = MXFP4Linear.from_mxfp4(plain)
    x = a.clone().requires_grad_()
    y = layer(x)
    g = torch.randn_like(y)
    (grad,) = torch.autograd.grad(y, x, g)
    assert torch.equal(grad, (g.float() @ mxfp4.dequantize(layer.weight)).bfloat16())
    model = torch.nn.Sequential(layer, torch.nn.Linear(256, 8, device="cuda", dtype=torch.bfloat16))
    x2 = a.clone().requires_grad_()
    loss = torch.compile(model, fullgraph=True)(x2).float().square().sum()
    loss.backward()
    assert x2.grad is not None and torch.isfinite(x2.grad).all()


@pytest.mark.gpu
def test_plan_is_remembered_per_shape():
    a, plain = cuda_operands(16, 2112, 7168)
    w = mxfp4.prepare(plain)
    mxfp4.gemm_a4w4(a, w)
    ops.gemm_a4w4_partial(a, w)
    params = ops.params_for(plan.Problem(16, 2112, 7168), a.device)
    assert ops._chosen[(16, 2112, 7168, a.device.index, False)] == params
    assert ops._chosen[(16, 2112, 7168, a.device.index, True)] == plan.float32_output(params)


@pytest.mark.gpu
@pytest.mark.parametrize("n, k", [(2112, 2880), (1000, 544)])  # the second: N % 16 == 8, K % 64 == 32 (padded)
@pytest.mark.parametrize("m", [1, 7, 16, 100, 333])  # the small-M kernel, the register and int8-weight kernels
def test_float32_partial_of_the_kernels_is_within_the_bound(m, n, k):
    a, plain = cuda_operands(m, n, k, seed=m)
    w = mxfp4.prepare(plain)
    torch.full((m, -(-n // 16) * 16), float("nan"), dtype=torch.float32, device="cuda")  # poison the next block
    out = ops.gemm_a4w4_partial(a, w)
    assert out.dtype == torch.float32 and out.shape == (m, n)
    exact, mag = testing.exact_product(a, plain)
    # unrounded: the float32 part of the kernels' bound alone (2**-149: float32's subnormal spacing)
    bound = (k // 32) * 2.0 ** -24 * mag + 2.0 ** -149
    assert ((out.double() - exact).abs() <= bound).all()
    assert torch.equal(out, ops.gemm_a4w4_partial(a, w))
    rounded = out.to(torch.bfloat16)
    assert testing.check_gemm(rounded, a, plain).passed
    one = mxfp4.gemm_a4w4(a, w)
    if m >= plan.WGMMA_MIN_M:  # the same float32 total the bf16 epilogue rounds
        assert torch.equal(rounded, one)
    else:  # the float64 total through float32 to bf16, against once to bf16: equal but where a float32 ulp decides
        assert (rounded == one).double().mean().item() >= 0.999


@pytest.mark.gpu
@pytest.mark.parametrize("n, k", [(2112, 2880), (1000, 544)])
@pytest.mark.parametrize("m", [1, 7, 16, 100, 333])
def test_bias_on_the_kernels_is_added_to_the_float32_total_and_rounded_once(m, n, k):
    a, plain = cuda_operands(m, n, k, seed=m + 1)
    w = mxfp4.prepare(plain)
    bias = torch.randn(n, device="cuda").bfloat16()
    out = mxfp4.gemm_a4w4(a, w, bias=bias)
    assert out.dtype is torch.bfloat16 and torch.equal(out, ops.add_bias(ops.gemm_a4w4_partial(a, w), bias,
                                                                           torch.bfloat16))
    exact, mag = testing.exact_product(a, plain)
    biased = exact + bias.double()
    assert ((out.double() - biased).abs() <= testing.biased_bound(biased, mag, k)).all()
    assert (out == reference.round_to_bf16(biased)).double().mean().item() >= 0.999
    layer = MXFP4Linear.from_mxfp4(plain, bias)
    assert torch.equal(layer.cuda()(a), out)
    ws = [plain, mxfp4.quantize(torch.randn(n, k, device="cuda").bfloat16())]
    biases = torch.stack([bias, torch.randn(n, device="cuda").bfloat16()])
    offsets = torch.tensor([m // 2, m], dtype=torch.int32, device="cuda")
    grouped = mxfp4.grouped_gemm_a4w4(a, mxfp4.ExpertWeights.stack(ws), offsets, bias=biases)
    for e, (r0, r1) in enumerate(((0, m // 2), (m // 2, m))):
        assert torch.equal(grouped[r0:r1], mxfp4.gemm_a4w4(a[r0:r1], mxfp4.prepare(ws[e]), bias=biases[e]))
