"""The one-launch Triton kernel against the exact oracle.

On a CPU machine the kernel runs under TRITON_INTERPRET=1 (conftest sets it) on small shapes;
tests marked ``gpu`` run the compiled kernel on CUDA at the task's and odd shapes.
"""
import dataclasses

import pytest
import torch

import mxfp4
from mxfp4 import KernelConfig, Layout, ScaleRule, fold, ops, task, testing
from mxfp4.tuning import heuristic_config

CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def operands(m, n, k, seed, device="cpu", layout=Layout.PLAIN, rule=ScaleRule.AITER):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).to(device)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16).to(device)
    return a, mxfp4.quantize(b, rule).to_layout(layout)


def run_and_check(a, w, config=None):
    """Kernel output (poisoned first) passes the exact bound; its quantized A equals mxfp4.quantize
    (or, for the int8 kernel, the fold of it, bit for bit)."""
    out, aq = ops.gemm_a4w4_debug(a, w, config)
    ref = mxfp4.quantize(a.reshape(-1, a.shape[-1]), w.scale_rule)
    if isinstance(aq, fold.Folded):
        differing = fold.differing_arrays(aq, fold.fold_tensor(ref, aq.seg_blocks))
        assert not differing, f"in-launch folded A differs from fold_tensor(quantize(a)) in {differing}"
    else:
        assert torch.equal(aq.data, ref.data), "in-kernel quantized A codes differ from mxfp4.quantize"
        assert torch.equal(aq.scales, ref.scales), "in-kernel A scales differ from mxfp4.quantize"
    report = testing.check_gemm(out, a, w)
    assert report.passed, report
    return out


# ---- CPU interpreter (and GPU when present) on small shapes -------------------------------------

SMALL = [
    (1, 16, 64, KernelConfig(16, 16, 1)),
    (7, 48, 320, KernelConfig(16, 32, 2, num_stages=2)),
    (33, 80, 512, KernelConfig(32, 32, 3)),
    (100, 16, 128, KernelConfig(64, 16, 4)),
    (7, 48, 320, KernelConfig(16, 32, 3, blocks_per_step=4)),
    (33, 80, 512, KernelConfig(32, 32, 1, blocks_per_step=2)),
    (100, 16, 128, KernelConfig(64, 16, 4, blocks_per_step=8)),
    (1, 16, 64, KernelConfig(16, 16, 1, blocks_per_step=2, kernel="direct")),
    (7, 48, 320, KernelConfig(16, 32, 2, blocks_per_step=2, kernel="direct")),
    (33, 80, 512, KernelConfig(32, 32, 3, blocks_per_step=4, kernel="direct")),
    (100, 16, 128, KernelConfig(64, 16, 1, blocks_per_step=4, kernel="direct")),
    (7, 48, 320, KernelConfig(16, 32, 2, 4, 2, blocks_per_step=2, kernel="int8")),
    (100, 16, 128, KernelConfig(64, 16, 1, 4, 2, blocks_per_step=4, kernel="int8")),
]
DIRECT = KernelConfig(16, 16, 2, blocks_per_step=2, kernel="direct")


@pytest.mark.parametrize("m, n, k, cfg", SMALL)
@pytest.mark.parametrize("layout", [Layout.PLAIN, Layout.AITER_SHUFFLED])
def test_small_shapes(m, n, k, cfg, layout):
    if layout is Layout.AITER_SHUFFLED and k % 64:
        pytest.skip("the shuffled layout needs K % 64 == 0")
    dev = "cuda" if CUDA else "cpu"
    a, w = operands(m, n, k, seed=m * 7 + n, device=dev, layout=layout)
    run_and_check(a, w, cfg)


def test_output_is_fully_written_and_layouts_agree():
    dev = "cuda" if CUDA else "cpu"
    a, w = operands(9, 48, 128, seed=3, device=dev)
    outs = []
    for layout in (Layout.PLAIN, Layout.AITER_SHUFFLED):
        out = torch.full((9, 48), float("nan"), dtype=torch.bfloat16, device=dev)
        mxfp4.gemm_a4w4(a, w.to_layout(layout), out=out, backend="triton", config=KernelConfig(16, 16, 2))
        assert not torch.isnan(out).any(), "an output element was left unwritten"
        outs.append(out)
    assert torch.equal(outs[0], outs[1])


def test_special_values_follow_the_quantizer():
    """NaN / Inf blocks give NaN rows; zero, subnormal and saturating blocks quantize as documented."""
    dev = "cuda" if CUDA else "cpu"
    a, w = operands(8, 32, 128, seed=5, device=dev)
    a[0, 3] = float("nan")
    a[0, 4] = 2.0 ** -15  # finite values beside NaN / Inf scale far up inside the kernels:
    a[1, 40] = float("inf")  # inf - inf there once gave a negative NaN on the CPU
    a[1, 41] = -(2.0 ** -15)
    a[2, 64:96] = 0
    a[3, 0:32] = torch.tensor(2.0 ** -130, dtype=torch.bfloat16)  # subnormal bf16 block
    a[4, 32:64] *= 1e30                                              # huge block next to normal ones
    a[5, 0:32] = 7.0                                                 # 7/2**e: saturates to 6
    for cfg in (KernelConfig(16, 16, 2),
                KernelConfig(16, 16, 2, blocks_per_step=2), DIRECT):
        out = run_and_check(a, w, cfg)
        assert torch.isnan(out[0]).all() and torch.isnan(out[1]).all()
        assert not torch.isnan(out[2:]).any()


def test_floor_scale_rule():
    dev = "cuda" if CUDA else "cpu"
    a, w = operands(5, 32, 128, seed=11, device=dev, rule=ScaleRule.FLOOR)
    run_and_check(a, w, KernelConfig(16, 32, 1))
    run_and_check(a, w, DIRECT)


def _adversarial_a(rows, k, seed):
    """Blocks at random exponents over the whole bf16 range (subnormals, huge), values on and one
    bf16 ulp around every e2m1 midpoint and saturation point, random signs and zeros."""
    g = torch.Generator().manual_seed(seed)
    points = torch.tensor([0.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 6.5, 7.0, 7.75, 0.5, 3.0])
    t = points[torch.randint(0, len(points), (rows, k), generator=g)].to(torch.bfloat16)
    nudge = torch.randint(-1, 2, (rows, k), generator=g, dtype=torch.int16)
    bits = t.view(torch.int16)
    t = torch.where(t != 0, (bits + nudge).view(torch.bfloat16), t).float()
    exps = torch.randint(-133, 126, (rows, k // 32), generator=g).repeat_interleave(32, 1)
    signs = torch.where(torch.rand(rows, k, generator=g) < 0.5, -1.0, 1.0)
    return (t.double() * torch.pow(2.0, exps.double()) * signs).to(torch.bfloat16)


@pytest.mark.parametrize("cfg", [KernelConfig(16, 16, 2, blocks_per_step=16, kernel="direct"),
                                 KernelConfig(16, 16, 2)])
@pytest.mark.parametrize("rule", [ScaleRule.AITER, ScaleRule.FLOOR])
def test_quantizer_on_adversarial_blocks(rule, cfg):
    """Both kernels' in-launch quantizers (the direct one rounds with float arithmetic, the
    persistent one compares integers) equal mxfp4.quantize on ties, near-ties, saturation and
    blocks at every exponent (bf16 subnormal up to 2**126)."""
    dev = "cuda" if CUDA else "cpu"
    a = _adversarial_a(16, 1024, seed=21 if rule is ScaleRule.AITER else 22).to(dev)
    g = torch.Generator().manual_seed(23)
    w = mxfp4.quantize((torch.randn(16, 1024, generator=g) * 1e-30).to(torch.bfloat16).to(dev), rule)
    out, aq = ops.gemm_a4w4_debug(a, w, cfg)
    ref = mxfp4.quantize(a, rule)
    assert torch.equal(aq.scales, ref.scales)
    assert torch.equal(aq.data, ref.data)
    # Rows mixing block scales 2**-135 .. 2**124 make float32 summation order visible: the bound
    # must hold everywhere, but on 256 outputs the 99.9 % bit-identical rule is one element.
    report = testing.check_gemm(out, a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report


def test_wide_block_scale_spread():
    """Rows scaled by 2**-20 .. 2**20 block to block stay exact."""
    dev = "cuda" if CUDA else "cpu"
    a, w = operands(6, 32, 256, seed=13, device=dev)
    g = torch.Generator().manual_seed(1)
    spread = torch.pow(2.0, torch.randint(-20, 21, (6, 8), generator=g).float()).repeat_interleave(32, 1)
    a = (a.float().cpu() * spread).to(torch.bfloat16).to(dev)
    run_and_check(a, w, KernelConfig(16, 32, 2))
    run_and_check(a, w.to_layout(Layout.AITER_SHUFFLED), KernelConfig(16, 32, 2, blocks_per_step=2))


# ---- GPU at real shapes ------------------------------------------------------------------------

@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m, n, k, seed", task.TEST_SHAPES + task.BENCHMARK_SHAPES)
def test_task_shapes_on_gpu(m, n, k, seed):
    data = task.generate_input(m, n, k, seed, device="cuda")
    a = data[0]
    w = task.weight_from_task(data[3], data[4], k)
    out = run_and_check(a, w)
    c = task.custom_kernel(data)
    assert torch.equal(c, out)
    expected = mxfp4.reference.gemm_a4w4(a, w)
    torch.testing.assert_close(c.float(), expected.float(), rtol=1e-2, atol=1e-2)  # the task's own check


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m", [1, 7, 100, 333, 1024])
@pytest.mark.parametrize("n, k", [(2112, 512), (3072, 1536), (7168, 7168), (200 * 16 + 16, 2048)])
@pytest.mark.parametrize("variant", [{}, {"blocks_per_step": 4}, "direct"])
def test_odd_shapes_on_gpu(m, n, k, variant):
    a, w = operands(m, n, k, seed=m + n + k, device="cuda", layout=Layout.AITER_SHUFFLED)
    if variant == "direct":
        cfg = KernelConfig(32 if m > 16 else 16, 32, 4, blocks_per_step=8, kernel="direct")
    else:
        cfg = dataclasses.replace(heuristic_config(m, n, k, kernel="persistent"), **variant)
    run_and_check(a, w, cfg)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m", [1024, 4096, 8192])
@pytest.mark.parametrize("n, k", [(7168, 2048), (8192, 7168)])
def test_large_m_on_gpu(m, n, k):
    """Prefill sizes through the library's own config choice (table or heuristic), checked on
    every 29th row (every output tile); the wide-spread case scales rows by 2**-20 .. 2**20."""
    a, w = operands(m, n, k, seed=m + n, device="cuda", layout=Layout.AITER_SHUFFLED)
    rows = testing.sample_rows(m, limit=0)
    out = mxfp4.gemm_a4w4(a, w)
    assert testing.check_gemm(out, a, w, rows).passed
    if (m, n) == (1024, 7168):
        g = torch.Generator().manual_seed(2)
        spread = torch.pow(2.0, torch.randint(-20, 21, (m, k // 32), generator=g).float()).repeat_interleave(32, 1)
        a = (a.float().cpu() * spread).to(torch.bfloat16).cuda()
        assert testing.check_gemm(mxfp4.gemm_a4w4(a, w), a, w, rows).passed


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("m, n, k, config", [
    (16, 2112, 7168, None),  # the task's shape through the shipped table (split-K 14)
    (64, 7168, 2048, KernelConfig(64, 128, 3, 4, 3, 4, "int8_meet")),  # in-launch meeting and split-K
])
def test_deterministic_over_100_calls(m, n, k, config):
    data = task.generate_input(m, n, k, 15, device="cuda")
    w = task.weight_from_task(data[3], data[4], k)
    first = mxfp4.gemm_a4w4(data[0], w, config=config)
    for _ in range(99):
        assert torch.equal(mxfp4.gemm_a4w4(data[0], w, config=config), first)


@pytest.mark.parametrize("m, k", [(0, 64), (3, 0)])
def test_degenerate_shapes_on_the_kernel_path(m, k):
    dev = "cuda" if CUDA else "cpu"
    a = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
    w = mxfp4.quantize(torch.randn(16, k, dtype=torch.bfloat16, device=dev))
    out = mxfp4.gemm_a4w4(a, w, backend="triton")
    assert out.shape == (m, 16) and torch.equal(out, mxfp4.reference.gemm_a4w4(a, w))
