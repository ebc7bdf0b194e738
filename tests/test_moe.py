"""Mixture of experts on the CPU: the stacked expert weights, grouped_gemm_a4w4 against per-expert
reference GEMMs and an independent float64 oracle, bad inputs. The grouped kernels on a Hopper GPU:
test_moe_kernels.py."""
import pytest
import torch

import mxfp4
from mxfp4 import plan, reference
from mxfp4.formats import unpack_codes
from mxfp4.fuzz.oracle import oracle_quantize, oracle_values, round_bf16
from mxfp4 import ExpertWeights, grouped_gemm_a4w4
from mxfp4.moe import padded_rows


def experts(e: int, n: int, k: int, seed: int = 0) -> list[mxfp4.MXFP4Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [mxfp4.quantize(torch.randn(n, k, generator=g).bfloat16()) for _ in range(e)]


def offsets_of(counts: list[int]) -> torch.Tensor:
    return torch.tensor(counts).cumsum(0).to(torch.int32)


def test_stack_keeps_each_expert_as_prepare_would_lay_it_out():
    ws = experts(3, 40, 96)  # N % 16 != 0, K % 64 != 0: both padded
    stacked = ExpertWeights.stack(ws)
    assert (stacked.num_experts, stacked.n, stacked.n_padded, stacked.k) == (3, 40, 256, 96)
    assert stacked.weight.shape == (3 * 256, 96) and stacked.weight.layout is mxfp4.Layout.AITER_SHUFFLED
    for e, w in enumerate(ws):
        view, alone = stacked.expert(e), mxfp4.prepare(w)
        assert torch.equal(view.data, alone.data) and torch.equal(view.scales, alone.scales)
        assert view.data.data_ptr() == stacked.weight.data[e * 256:].data_ptr()  # a view, not a copy
        plain = stacked.plain(e)
        assert torch.equal(plain.data, w.data) and torch.equal(plain.scales, w.scales)
    assert stacked.kept_bytes() == stacked.weight.data.numel() + stacked.weight.scales.numel()
    assert [padded_rows(n) for n in (1, 256, 257, 2880, 5760, 7168)] == [256, 256, 512, 3072, 5888, 7168]


def oracle(a: torch.Tensor, ws: list[mxfp4.MXFP4Tensor], counts: list[int]) -> torch.Tensor:
    """float64 product of the oracle's quantized rows with each row's expert, rounded once to bf16 (the
    float64 sums are exact here: randn blocks span few binary orders)."""
    codes, scales = oracle_quantize(a)
    aq = oracle_values(codes, scales)
    rows, start = [], 0
    for w, c in zip(ws, counts):
        wq = oracle_values(unpack_codes(w.data), w.scales)
        rows.append(aq[start:start + c] @ wq.T)
        start += c
    return round_bf16(torch.cat(rows))


@pytest.mark.parametrize("counts", [[1], [0, 7, 0], [3, 0, 1, 96, 0], [100, 1, 0, 232]],
                         ids=["T1", "T7", "T100", "T333"])
def test_grouped_gemm_is_each_experts_exact_product(counts):
    e, n, k = len(counts), 40, 96
    ws = experts(e, n, k, seed=len(counts))
    stacked = ExpertWeights.stack(ws)
    a = torch.randn(sum(counts), k, generator=torch.Generator().manual_seed(1)).bfloat16()
    out = grouped_gemm_a4w4(a, stacked, offsets_of(counts).long())
    assert out.shape == (sum(counts), n) and out.dtype is torch.bfloat16
    start = 0
    for w, c in zip(ws, counts):
        assert torch.equal(out[start:start + c], reference.gemm_a4w4(a[start:start + c], w))
        start += c
    assert torch.equal(out, oracle(a, ws, counts))
    assert torch.equal(grouped_gemm_a4w4(a, stacked, offsets_of(counts)), out)  # int32 offsets, and again


def test_grouped_gemm_adds_each_experts_bias_before_the_rounding():
    counts = [3, 0, 5]
    ws = experts(3, 40, 64, seed=9)
    a = torch.randn(8, 64, generator=torch.Generator().manual_seed(2)).bfloat16()
    bias = torch.randn(3, 40, generator=torch.Generator().manual_seed(3))
    out = grouped_gemm_a4w4(a, ExpertWeights.stack(ws), offsets_of(counts), bias=bias)
    assert torch.equal(out[:3], reference.gemm_a4w4(a[:3], ws[0], bias=bias[0]))
    assert torch.equal(out[3:], reference.gemm_a4w4(a[3:], ws[2], bias=bias[2]))
    with pytest.raises(ValueError, match=r"bias must be a tensor \[3, 40\] \(one row per expert\), got "
                                         r"torch.Size\(\[40\]\)"):
        grouped_gemm_a4w4(a, ExpertWeights.stack(ws), offsets_of(counts), bias=bias[0])
    with pytest.raises(ValueError, match=r"bias must have shape \(40,\) \(w's N\), got \(41,\)"):
        grouped_gemm_a4w4(a, ExpertWeights.stack(ws), offsets_of(counts), bias=torch.zeros(3, 41))


def test_grouped_gemm_takes_fp16_and_float32_rows_and_no_rows():
    ws = experts(2, 16, 64)
    stacked = ExpertWeights.stack(ws)
    a = torch.randn(5, 64)
    for x in (a, a.half()):
        out = grouped_gemm_a4w4(x, stacked, offsets_of([2, 3]))
        assert torch.equal(out, torch.cat([reference.gemm_a4w4(x[:2], ws[0]), reference.gemm_a4w4(x[2:], ws[1])]))
    assert grouped_gemm_a4w4(a[:0], stacked, offsets_of([0, 0])).shape == (0, 16)


BAD = {
    "not_stacked": (lambda a, w, o: (a, w.expert(0), o), TypeError, "w must be an mxfp4.ExpertWeights"),
    "a_3d": (lambda a, w, o: (a[None], w, o), ValueError, r"a must be 2-D \[T, K\]"),
    "a_k": (lambda a, w, o: (a[:, :32], w, o), ValueError, r"a.shape\[-1\] \(K = 32\) must equal w's K \(64\)"),
    "a_int": (lambda a, w, o: (a.int(), w, o), TypeError, "a must be bfloat16, float16 or float32"),
    "offsets_list": (lambda a, w, o: (a, w, [2, 5]), TypeError, "offsets must be a torch.Tensor"),
    "offsets_float": (lambda a, w, o: (a, w, o.float()), TypeError, "offsets must be int32 or int64"),
    "offsets_e_plus_1": (lambda a, w, o: (a, w, torch.tensor([0, 2, 5], dtype=torch.int32)), ValueError,
                         r"offsets must have shape \(2,\): one cumulative end per expert"),
    "offsets_decrease": (lambda a, w, o: (a, w, torch.tensor([3, 2], dtype=torch.int32)), ValueError,
                         r"non-decreasing from 0 \(cumulative ends\): offsets\[1\] = 2 < 3"),
    "offsets_negative": (lambda a, w, o: (a, w, torch.tensor([-1, 5], dtype=torch.int32)), ValueError,
                         r"offsets\[0\] = -1 < 0"),
    "offsets_short": (lambda a, w, o: (a, w, torch.tensor([2, 4], dtype=torch.int32)), ValueError,
                      r"offsets\[-1\] \(4\) must equal a.shape\[0\] \(5\)"),
    "offsets_device": (lambda a, w, o: (a, w, o.to("meta")), ValueError, r"offsets \(meta\) must be on a's device"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_grouped_gemm_bad_inputs_name_the_argument_and_rule(case):
    make, error, message = BAD[case]
    stacked = ExpertWeights.stack(experts(2, 16, 64))
    args = make(torch.randn(5, 64).bfloat16(), stacked, offsets_of([2, 3]))
    with pytest.raises(error, match=message):
        grouped_gemm_a4w4(*args)


def test_grouped_gemm_refuses_a_float32_variant_as_params():
    stacked = ExpertWeights.stack(experts(2, 16, 64))
    for params in (plan.GROUPED_WGMMA, plan.grouped_stream_tile(1, 5, 2, 16, 64)):
        with pytest.raises(ValueError, match=r"params.tile.out_f32 variants write the float32 totals"):
            grouped_gemm_a4w4(torch.randn(5, 64).bfloat16(), stacked, offsets_of([2, 3]),
                              params=plan.float32_output(params))


def test_grouped_gemm_is_inference_only():
    stacked = ExpertWeights.stack(experts(1, 16, 64))
    a = torch.randn(2, 64, requires_grad=True)
    with pytest.raises(ValueError, match="inference only"):
        grouped_gemm_a4w4(a, stacked, offsets_of([2]))
    with torch.no_grad():
        assert grouped_gemm_a4w4(a, stacked, offsets_of([2])).shape == (2, 16)


def test_stack_refuses_mixed_experts():
    with pytest.raises(ValueError, match=r"experts\[1\] is \(32, 64\) AITER; every expert must be 2-D"):
        ExpertWeights.stack([experts(1, 16, 64)[0], experts(1, 32, 64)[0]])
    with pytest.raises(ValueError, match="non-empty list"):
        ExpertWeights.stack([])
    with pytest.raises(ValueError, match=r"must have logical shape \(512, 64\)"):
        ExpertWeights(mxfp4.prepare(experts(1, 256, 64)[0]), 2, 16)
