"""The fuzzer: its oracle against rational arithmetic and the library's quantizer, its sensitivity to
a planted one-ulp error, replay of one case, and a CI-sized run on this machine's backend; on a Hopper GPU
(marker gpu) runs on the kernels, the large-M kernel's cases too."""
import io
import math
from fractions import Fraction

import pytest
import torch

import mxfp4
from mxfp4 import formats, fuzz, reference, testing
from mxfp4.formats import ScaleRule


def fraction_to_bf16(x: Fraction) -> float:
    """Nearest bf16 of a rational (ties to even) by integer arithmetic on the scaled value."""
    if x == 0:
        return 0.0
    sign, x = (-1.0 if x < 0 else 1.0), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1  # now 2**e <= x < 2**(e + 1)
    quantum = Fraction(2) ** (max(e, -126) - 7)
    q, r = divmod(x, quantum)
    q = int(q) + (r > quantum / 2 or (r == quantum / 2 and int(q) % 2 == 1))
    value = q * quantum
    return sign * (math.inf if value >= 2 ** 128 else float(value))


def fraction_oracle(a_codes, a_scales, w_codes, w_scales, bias=None) -> torch.Tensor:
    vals = {c: Fraction(v) for c, v in enumerate(formats.E2M1_VALUES)}
    m, k = a_codes.shape
    n = w_codes.shape[0]
    out = torch.empty(m, n, dtype=torch.float64)
    for i in range(m):
        for j in range(n):
            total = Fraction(0) if bias is None else Fraction(float(bias[j]))
            nan = False
            for b in range(k // 32):
                sa, sw = int(a_scales[i, b]), int(w_scales[j, b])
                if sa == 255 or sw == 255:
                    nan = True
                    break
                dot = sum(vals[int(a_codes[i, b * 32 + t])] * vals[int(w_codes[j, b * 32 + t])] for t in range(32))
                total += dot * Fraction(2) ** (sa + sw - 254)
            out[i, j] = math.nan if nan else fraction_to_bf16(total)
    return out


@pytest.mark.parametrize("index", range(12))
def test_oracle_gemm_equals_rational_arithmetic(index):
    # small cases of every profile, the wide and cancelling ones included
    case = fuzz.draw_case(7, index)
    case = fuzz.Case(7, index, "gemm", False, case.dtype, case.floor_rule, (3,), 5, 128,
                     ("randn", "wide", "mixed", "cancel")[index % 4], False)
    g = torch.Generator().manual_seed(index)
    a, b = fuzz.make_operands(case, g)
    ac, asc = fuzz.oracle_quantize(a, case.floor_rule)
    wc, wsc = fuzz.oracle_quantize(b, case.floor_rule)
    got = fuzz.oracle_gemm(ac, asc, wc, wsc).bf16.double()
    want = fraction_oracle(ac, asc, wc, wsc)
    assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0))


@pytest.mark.parametrize("index", range(8))
def test_oracle_gemm_with_a_bias_equals_rational_arithmetic(index):
    # the bias as one more exact term: every dtype, the wide profile's range and zeros among them
    dtype = ("bf16", "fp16", "fp32")[index % 3]
    case = fuzz.Case(9, index, "gemm", False, dtype, False, (3,), 6, 128, ("randn", "wide", "mixed", "cancel")[index % 4],
                     False, bias=True)
    g = torch.Generator().manual_seed(100 + index)
    a, b = fuzz.make_operands(case, g)
    bias = fuzz.make_bias(case, g)
    ac, asc = fuzz.oracle_quantize(a)
    wc, wsc = fuzz.oracle_quantize(b)
    got = fuzz.oracle_gemm(ac, asc, wc, wsc, bias).bf16.double()
    want = fraction_oracle(ac, asc, wc, wsc, bias)
    assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0))
    assert not torch.equal(fuzz.oracle_gemm(ac, asc, wc, wsc).bf16.double().nan_to_num(7.0), want.nan_to_num(7.0)) \
        or bool((bias == 0).all())


def test_oracle_gemm_on_the_extremes():
    # one block at the largest scales (2**252 a term), one at the smallest, and cancellation
    a = torch.zeros(2, 96, dtype=torch.uint8)
    w = torch.zeros(2, 96, dtype=torch.uint8)
    a[:, 0] = 7; w[:, 0] = 7                       # 6 * 6
    a[:, 32] = 1; w[:, 32] = 1                     # 0.5 * 0.5
    a[1, 64] = 15; w[:, 64] = 7                    # -6 * 6: cancels block 0 of row 1
    asc = torch.tensor([[254, 0, 0], [254, 0, 254]], dtype=torch.uint8)
    wsc = torch.tensor([[254, 0, 254], [1, 0, 1]], dtype=torch.uint8)
    got = fuzz.oracle_gemm(a, asc, w, wsc)
    want = fraction_oracle(a, asc, w, wsc)
    assert torch.equal(got.bf16.double(), want)
    assert got.value[1, 0].item() == 2.0 ** -256 and got.bf16[1, 0].item() == 0.0  # 36 * 2**254 cancelled
    assert math.isinf(got.bf16[0, 0].item())


@pytest.mark.parametrize("rule", list(ScaleRule))
def test_oracle_quantize_equals_formats_on_every_bf16_pattern(rule):
    x = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(-1, 64)
    codes, scales = fuzz.oracle_quantize(x, rule is ScaleRule.FLOOR)
    want_codes, want_scales = formats.quantize_codes(x, rule)
    assert torch.equal(codes, want_codes) and torch.equal(scales, want_scales)


def test_oracle_quantize_equals_formats_on_float32_edges():
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 2 ** 31, (4096, 32), generator=g, dtype=torch.int64)
    bits[::3] = (bits[::3] & 0x807FFFFF) | (torch.randint(0, 255, (1366, 32), generator=g) << 23)
    bits[1::7, 0] = 0x7F600000  # amax 1.75 * 2**127: the aiter rule's log2(Inf) clamp
    x = bits.to(torch.int32).view(torch.float32)
    for rule in ScaleRule:
        codes, scales = fuzz.oracle_quantize(x, rule is ScaleRule.FLOOR)
        want_codes, want_scales = formats.quantize_codes(x, rule)
        assert torch.equal(codes, want_codes) and torch.equal(scales, want_scales)


def test_oracle_gemm_matches_testing_oracle_where_float64_is_exact():
    a = torch.randn(9, 256).bfloat16()
    w = mxfp4.quantize(torch.randn(24, 256).bfloat16())
    ac, asc = fuzz.oracle_quantize(a)
    got = fuzz.oracle_gemm(ac, asc, formats.unpack_codes(w.data), w.scales)
    exact, mag = testing.exact_product(a, w)
    assert torch.equal(got.value, exact) and torch.allclose(got.magnitude, mag, rtol=1e-15)


def test_a_planted_one_ulp_error_is_caught_with_a_reproducer(monkeypatch):
    real = reference.gemm_a4w4

    def off_by_one_ulp(*args, **kwargs):
        out = real(*args, **kwargs)
        if out.dtype == torch.bfloat16 and out.numel():
            out.view(torch.int16).view(-1)[0] += 1  # the next bf16 away from zero
        return out

    monkeypatch.setattr(reference, "gemm_a4w4", off_by_one_ulp)
    text = io.StringIO()
    assert fuzz.fuzz(40, 3, "reference", out=text) == 1
    lines = [x for x in text.getvalue().splitlines() if x.startswith("mxfp4 fuzz --seed 3 --case")]
    assert lines and "bit-exact" in text.getvalue()


def test_a_planted_quantize_tie_error_is_caught(monkeypatch):
    real = formats.quantize_codes

    def ties_up(x, rule=ScaleRule.AITER):
        codes, scales = real(x, rule)
        return torch.where(codes == 2, torch.full_like(codes, 3), codes), scales  # 1.0 -> 1.5

    monkeypatch.setattr(formats, "quantize_codes", ties_up)
    text = io.StringIO()
    assert fuzz.fuzz(30, 4, "reference", out=text) == 1
    assert "quantize:" in text.getvalue()


def test_replaying_a_case_gives_the_same_case():
    assert fuzz.draw_case(11, 5) == fuzz.draw_case(11, 5)
    c = fuzz.draw_case(11, 5)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    a1, b1 = fuzz.make_operands(c, g1)
    a2, b2 = fuzz.make_operands(c, g2)
    assert torch.equal(a1.view(torch.uint8), a2.view(torch.uint8))
    assert torch.equal(b1.view(torch.uint8), b2.view(torch.uint8))


def test_reference_cancellation_far_above_the_result():
    # block terms far larger than the result cancel (float64 alone leaves 5 of 1024 outputs off)
    text = io.StringIO()
    assert fuzz.fuzz(1, 1, "reference", case=255, jobs=1, out=text) == 0
    assert "1024 elements, 100.0000% bit-identical" in text.getvalue()


@pytest.mark.slow
def test_ci_run(capsys):
    # 5,000 cases: about 100 s of CPU time, 70 s on 2 cores (the H200 runs 10**5: see README)
    text = io.StringIO()
    rc = fuzz.fuzz(5000, 2026, "auto", jobs=2, out=text)
    print(text.getvalue())
    assert rc == 0, text.getvalue()
    summary = text.getvalue().splitlines()[-1]
    assert "5000 cases" in summary and " 0 failed cases" in summary
    progress = [x for x in capsys.readouterr().err.splitlines() if x.startswith("mxfp4 fuzz: ")]
    assert len(progress) == 20 and progress[-1].startswith("mxfp4 fuzz: 5000 of 5000 cases, 0 failed")


def test_large_m_cases_reach_the_large_m_kernel():
    from mxfp4 import plan

    cases = [fuzz.draw_case(9, i, large_m=True) for i in range(400)]
    for c in cases:
        m = int(torch.Size(c.lead).numel())
        assert m >= plan.WGMMA_MIN_M and c.shuffled and c.dtype == "bf16" and not c.floor_rule, c
        assert c.n % 16 == 0 and c.k % 64 == 0 and c.entry not in ("quantize", "gemm_params"), c
    assert {c.entry for c in cases} == {"gemm", "gemm_out", "linear", "from_linear", "op", "task"}
    assert {c.profile for c in cases} == {"randn", "wide", "mixed", "cancel"}
    tiles = {plan.wgmma_params(plan.Problem(int(torch.Size(c.lead).numel()), c.n, c.k)).tn for c in cases}
    assert tiles == {64, 128}
    assert fuzz.draw_case(9, 3, large_m=True) == cases[3] != fuzz.draw_case(9, 3)
    assert fuzz.reproducer(cases[3], "cuda").endswith("--case 3 --backend cuda --large-m")


def test_large_m_run_on_this_machine():
    text = io.StringIO()
    rc = fuzz.fuzz(24, 5, "auto", jobs=1, out=text, large_m=True)
    assert rc == 0, text.getvalue()
    assert "24 cases drawn for the large-M kernel" in text.getvalue() and " 0 failed cases" in text.getvalue()

def test_grouped_cases_reach_every_grouped_kernel():
    """--grouped: every forced kernel and the heuristic, each dtype of A, int32 and int64 offsets, a bias for some,
    empty experts, one-row experts, decode and prefill counts; replayable, and not the default draw."""
    from mxfp4 import plan
    from mxfp4.fuzz.cases import GROUPED_VARIANTS

    cases = [fuzz.draw_case(4, i, grouped=True) for i in range(300)]
    assert all(c.entry == "grouped" and sum(c.counts) == c.lead[0] >= 1 and c.k % 32 == 0 for c in cases)
    assert {c.variant for c in cases} == set(GROUPED_VARIANTS) and {c.dtype for c in cases} == {"bf16", "fp16", "fp32"}
    assert {c.off64 for c in cases} == {False, True} and {c.bias for c in cases} == {False, True}
    counts = [x for c in cases for x in c.counts]
    assert 0 in counts and 1 in counts and any(2 <= x <= 16 for x in counts) and max(counts) > 64
    kinds = {type(plan.grouped_heuristic(c.lead[0], len(c.counts), -(-c.n // 16) * 16, -(-c.k // 64) * 64))
             for c in cases}
    assert kinds == {plan.GroupedStreamParams, plan.GroupedWgmmaParams}
    assert fuzz.draw_case(4, 7, grouped=True) == cases[7] != fuzz.draw_case(4, 7)
    assert fuzz.reproducer(cases[7], "cuda").endswith("--case 7 --backend cuda --grouped")


def test_grouped_run_catches_a_row_given_the_wrong_expert(monkeypatch):
    """The grouped cases pass on the reference, and fail once the stacked weight's experts are in the wrong order."""
    from mxfp4 import moe

    text = io.StringIO()
    assert fuzz.fuzz(6, 2, "reference", jobs=1, out=text, grouped=True) == 0, text.getvalue()
    assert "6 cases of grouped GEMMs" in text.getvalue()
    stack = moe.ExpertWeights.stack.__func__
    monkeypatch.setattr(moe.ExpertWeights, "stack",
                        classmethod(lambda cls, experts: stack(cls, experts[1:] + experts[:1])))
    text = io.StringIO()
    assert fuzz.fuzz(6, 2, "reference", jobs=1, out=text, grouped=True) == 1
    assert "--grouped  # entry=grouped" in text.getvalue()


# ---- on a Hopper GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
def test_fuzz_on_the_kernels():
    text = io.StringIO()
    rc = fuzz.fuzz(3000, 31, "cuda", jobs=1, out=text)
    print(text.getvalue())
    assert rc == 0, text.getvalue()
    text = io.StringIO()
    rc = fuzz.fuzz(1000, 32, "cuda", jobs=1, out=text, large_m=True)
    print(text.getvalue())
    assert rc == 0 and "1000 cases drawn for the large-M kernel (0 that" in text.getvalue(), text.getvalue()
    text = io.StringIO()
    rc = fuzz.fuzz(300, 33, "cuda", jobs=1, out=text, grouped=True)
    print(text.getvalue())
    assert rc == 0 and "300 cases of grouped GEMMs (0 that" in text.getvalue(), text.getvalue()


def test_forced_variant_entry_takes_dense_variants_only():
    """The gemm_params entry forces one of the dense GEMMs' shipped variants on gemm_a4w4, which refuses the
    grouped kernels' (seed 96 drew 116 such cases while the list held them, each a TypeError)."""
    from mxfp4 import plan
    from mxfp4.bench.shapes import shape_set

    forced = fuzz._shipped_variants()
    shipped = plan.shipped_variants([(s.m, s.n, s.k) for s in shape_set("all")])
    assert any(isinstance(p, (plan.GroupedStreamParams, plan.GroupedWgmmaParams)) for p in shipped)
    assert all(isinstance(p, plan.KERNEL_PARAMS) and not p.out_f32 for p in forced)
    assert {type(p) for p in forced} == set(plan.KERNEL_PARAMS)
