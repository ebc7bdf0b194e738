"""One case list that every backend runs against the oracle: odd shapes and special values; the operands
and the contract check that the kernel tests of every family share."""
import dataclasses

import torch

import mxfp4


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    m: int
    n: int
    k: int
    kind: str = "randn"  # randn | wide | special


CASES = (
    Case("m1", 1, 48, 64), Case("m7", 7, 176, 192), Case("m100", 100, 64, 640), Case("m333", 333, 32, 128),
    Case("task_small", 8, 2112, 512), Case("wide_m7", 7, 96, 512, "wide"), Case("special_m33", 33, 80, 256, "special"),
    Case("wide_m100", 100, 48, 256, "wide"), Case("special_m100", 100, 32, 512, "special"),
)


def make_case(case: Case, device: str, seed: int = 0):
    """(a bf16 [m, k], w prepared MXFP4 [n, k]) for ``case``."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(case.m, case.k, generator=g)
    b = torch.randn(case.n, case.k, generator=g)
    if case.kind in ("wide", "special"):
        e = torch.randint(-100, 100, (case.m, case.k // 32, 1), generator=g).float()
        a = (a.reshape(case.m, -1, 32) * torch.pow(2.0, e)).reshape(case.m, case.k)
    if case.kind == "special":
        a[0, :32] = 0.0                        # an all-zero block
        a[1, 40] = 2.0 ** -127                 # a block whose scale byte is 0 (2**-127)
        a[1, 32:40] = 0.0
        a[2, 64] = float("nan")                # NaN block: its row is NaN
        a[3, 5] = float("inf")
        a[4, 32:64] = 1e38                     # the largest bf16 scales (times W's ordinary ones)
        a[5, 0:32] = -0.0
        a[6, :64] = 2.0 ** -133                # bf16 subnormals
        b[:16, :32] = 2.0 ** 100               # with a[1]: the 2**-127-scale block gives 2**-27
        b[17, 64:96] = 0.0
    w = mxfp4.prepare(mxfp4.quantize(b.to(torch.bfloat16)))
    return a.to(torch.bfloat16).to(device), mxfp4.MXFP4Tensor(w.data.to(device), w.scales.to(device), w.shape, w.layout)


def exact_bf16(a: torch.Tensor, w) -> torch.Tensor:
    """The exact product of the quantized operands rounded once to bf16, by rational arithmetic
    (small cases only). Block sums of doubled e2m1 values are exact integers; each is scaled by
    the two half-scales exactly and summed as a Fraction; the result is rounded to nearest even."""
    import math
    from fractions import Fraction

    from mxfp4 import formats, reference
    from mxfp4.tensor import Layout, MXFP4Tensor

    a = a.cpu()
    w = MXFP4Tensor(w.data.cpu(), w.scales.cpu(), w.shape, w.layout, w.scale_rule)
    codes, scales = formats.quantize_codes(a)
    av, asc, _ = reference._blocks(MXFP4Tensor(formats.pack_codes(codes), scales, tuple(a.shape), Layout.PLAIN))
    wv, wsc, _ = reference._blocks(w)
    sums = torch.einsum("mbk,nbk->mnb", av, wv).tolist()
    asc, wsc = asc.tolist(), wsc.tolist()
    m, n, nb = len(sums), len(sums[0]), len(asc[0])
    out = torch.empty(m, n, dtype=torch.float64)
    for i in range(m):
        for j in range(n):
            if any(math.isnan(asc[i][b]) or math.isnan(wsc[j][b]) for b in range(nb)):
                out[i, j] = math.nan
                continue
            total = sum(Fraction(int(sums[i][j][b])) * Fraction(asc[i][b]) * Fraction(wsc[j][b]) for b in range(nb))
            out[i, j] = _round_fraction_to_bf16(total)
    return out.to(torch.bfloat16)


def _round_fraction_to_bf16(x) -> float:
    """Nearest bf16 of a Fraction (ties to even), through float64 rounded to odd (no double rounding)."""
    import math
    import struct

    try:
        f = float(x)  # correctly rounded
    except OverflowError:
        return math.copysign(math.inf, x)
    if f != x and math.isfinite(f):
        bits = struct.unpack("<q", struct.pack("<d", f))[0]
        if bits & 1 == 0:  # make it odd, toward x
            f = math.nextafter(f, math.inf if x > f else -math.inf)
    from mxfp4.reference import round_to_bf16

    return round_to_bf16(torch.tensor([f], dtype=torch.float64)).double().item()


def kernel_domain(a: torch.Tensor, w) -> torch.Tensor:
    """Bool [M, N]: outputs whose blocks all have -147 <= ea + ew <= 112 (the CUDA kernels' stated
    domain: every scale product is a float32 number and no float32 run can overflow)."""
    from mxfp4 import formats
    from mxfp4.tensor import Layout

    _, sa = formats.quantize_codes(a.cpu())
    sw = w.to_layout(Layout.PLAIN).scales.cpu()[:, : sa.shape[1]]
    esum = (sa.long() - 127)[:, None, :] + (sw.long() - 127)[None, :, :]
    return ((esum >= -147) & (esum <= 112)).all(-1)


"""Operands for the large-M kernel: randn; "spread" (blocks over 24 binary orders: no block folds
with another); "mixed" (an outlier channel and 7 spread rows); "heavy" (the bench's heavy-tailed set)."""
def large_m_operands(m, n, k, kind, seed=0):
    if kind == "heavy":  # the bench's heavy-tailed set (bench/data.py): tokens with blocks over many binary orders
        from mxfp4.bench.data import heavy_tailed

        a, b = heavy_tailed(m, n, k, seed, "cpu")
        return a, mxfp4.prepare(mxfp4.quantize(b))
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g)
    if kind == "spread":  # blocks over 24 binary orders: no segment folds
        a = a * torch.exp2(torch.randint(-12, 12, (m, k // 32), generator=g).float()).repeat_interleave(32, 1)
        b = b * torch.exp2(torch.randint(-12, 12, (n, k // 32), generator=g).float()).repeat_interleave(32, 1)
    if kind == "mixed":  # an outlier channel (its block leaves the band), the first 7 rows spread (their
        a[:7] *= torch.exp2(torch.randint(-9, 9, (min(m, 7), k // 32), generator=g).float()).repeat_interleave(32, 1)
        a[:, 5] *= 300.0  # tile's segments fold little), the other tiles' other blocks fold
    w = mxfp4.prepare(mxfp4.quantize(b.to(torch.bfloat16)))
    return a.to(torch.bfloat16), w


def fuzz_case_failures(case, run) -> list:
    """The failures of ``run(a [M, K], w prepared, problem)`` (float32 or bf16 [M, N]) on a fuzzer case's operands,
    judged as ``mxfp4 fuzz`` judges a GPU (against the exact oracle, inside the contract where its domain holds);
    ``problem`` is the kernels' (N and K padded to 16 and 64)."""
    from mxfp4 import fuzz, plan
    from mxfp4.fuzz.oracle import oracle_gemm, oracle_quantize

    a, b = fuzz.make_operands(case, fuzz.case_generator(case))
    a = a.reshape(-1, case.k)
    w = mxfp4.prepare(mxfp4.quantize(b))
    out = run(a, w, plan.Problem(a.shape[0], -(-case.n // 16) * 16, -(-case.k // 64) * 64)).to(torch.bfloat16)
    exact = oracle_gemm(*oracle_quantize(a, False), *oracle_quantize(b, False), None)
    return fuzz.compare(out, exact, case.k, True, fuzz.Result()).failures


def cuda_operands(m, n, k, seed=0, dtype=torch.bfloat16):
    """(a [m, k] of ``dtype``, w plain MXFP4 [n, k]), drawn on the GPU from ``seed``."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    w = mxfp4.quantize(torch.randn(n, k, generator=g, device="cuda", dtype=torch.bfloat16))
    return a, w


def same_bits(x: torch.Tensor, y: torch.Tensor) -> bool:
    return bool(((x.view(torch.int16) == y.view(torch.int16)) | (torch.isnan(x) & torch.isnan(y))).all())


def kernel_meets_the_contract(a, w, params, min_identical: float, repeats: int = 1) -> None:
    """gemm_a4w4 of the CPU operands ``a``, ``w`` on the GPU with ``params``: inside the kernels' bound
    with NaN / Inf where the exact product has them, at least ``min_identical`` of the outputs
    bit-identical to it, and the same bits on ``repeats`` more calls."""
    from mxfp4 import testing

    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    out = mxfp4.gemm_a4w4(a.cuda(), wd, params=params)
    report = testing.check_gemm(out.cpu(), a, w)
    assert report.violations == 0 and report.nonfinite_mismatch == 0, report
    assert report.identical_fraction >= min_identical, report
    for _ in range(repeats):
        assert same_bits(out, mxfp4.gemm_a4w4(a.cuda(), wd, params=params))


def variants_meet_special_values(kind: str, m: int, variants) -> None:
    """Every variant in ``variants`` that takes m x 32 x 512, on the "wide" or "special" case of that size:
    NaN / Inf where the exact product has them and inside the kernels' bound, in the kernels' domain."""
    from mxfp4 import plan, testing

    a, w = make_case(Case(kind, m, 32, 512, kind), "cpu")
    want = exact_bf16(a, w)
    domain = kernel_domain(a, w)
    exact, mag = testing.exact_product(a, w)
    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    for params in (p for p in variants if p.fits(plan.Problem(m, 32, 512))):
        out = mxfp4.gemm_a4w4(a.cuda(), wd, params=params).cpu()
        assert torch.equal(torch.isnan(out)[domain], torch.isnan(want)[domain])
        assert torch.equal(torch.isinf(out)[domain], torch.isinf(want)[domain])
        ok = torch.isfinite(want.double()) & torch.isfinite(out.double()) & domain
        assert ((out.double() - exact).abs()[ok] <= testing.kernel_bound(exact, mag, 512)[ok]).all()


def reads_fp16_and_float32_as_given(params, dtype) -> None:
    """gemm_a4w4 with the variant ``params`` on A of ``dtype`` (16x2112x2880, randn times 3.7) gives the
    reference's bits (every family's quantizer reads the dtype itself; test_ops_kernels checks the plan's choices)."""
    a, w = large_m_operands(16, 2112, 2880, "randn")
    a = (a.float() * 3.7).to(dtype)
    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    out = mxfp4.gemm_a4w4(a.cuda(), wd, params=params)
    assert torch.equal(out.cpu(), mxfp4.gemm_a4w4(a, w, backend="reference"))


def partial_meets_the_bound(m, n, k, family) -> None:
    """ops.gemm_a4w4_partial of m x n x k (the plan choosing ``family``'s kernel): every float32 total within
    (K/32) 2**-24 sum|a_k w_k| of the exact product."""
    from mxfp4 import ops, plan, testing

    a, w = large_m_operands(m, n, k, "randn")
    wd = mxfp4.MXFP4Tensor(w.data.cuda(), w.scales.cuda(), w.shape, w.layout)
    assert isinstance(ops.params_for(plan.Problem(m, n, k), torch.device("cuda")), family)
    part = ops.gemm_a4w4_partial(a.cuda(), wd).cpu().double()
    exact, mag = testing.exact_product(a, w)
    assert ((part - exact).abs() <= (k // 32) * 2.0 ** -24 * mag).all()
