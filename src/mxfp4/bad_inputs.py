"""Every bad input tried on the public API, with the exception it must raise and the argument its
message must name. ``tests/test_bad_inputs.py`` checks each row; ``docs/bad_inputs.md`` is
:func:`markdown_table` (``python -m mxfp4.fuzz --bad-inputs-table``), and a test keeps the two equal.
Every row runs on the CPU (the "meta" device stands in for a second device).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch


@dataclasses.dataclass(frozen=True)
class BadInput:
    call: str                   # what is called, as a reader would write it
    run: Callable[[], object]
    raises: type
    names: str                  # text the message must contain: the argument (and the rule)
    defect: str = ""            # an open defect: what it gets now falls short of ``raises`` / ``names``


def _ops():
    import mxfp4

    a = torch.randn(4, 128).bfloat16()
    w = mxfp4.prepare(mxfp4.quantize(torch.randn(32, 128).bfloat16()))
    return mxfp4, a, w


def _gemm(**kw):
    mxfp4, a, w = _ops()
    args = dict(a=a, w=w)
    args.update({k: v(a, w) if callable(v) else v for k, v in kw.items()})
    return mxfp4.gemm_a4w4(**args)


def _float32_params():
    from mxfp4 import plan

    return plan.GemmParams(out_f32=True)


def _out_overlapping_w():
    import mxfp4
    from mxfp4 import MXFP4Tensor

    w = mxfp4.quantize(torch.randn(32, 128).bfloat16())
    buf = torch.zeros(32 * 64 + 4 * 32 * 2, dtype=torch.uint8)
    buf[:32 * 64] = w.data.reshape(-1)
    shared = MXFP4Tensor(buf[:32 * 64].view(32, 64), w.scales, w.shape)
    out = buf.view(torch.bfloat16)[:4 * 32].view(4, 32)
    return mxfp4.gemm_a4w4(torch.randn(4, 128).bfloat16(), shared, out)


def _tensor(**kw):
    from mxfp4 import Layout, MXFP4Tensor

    args = dict(data=torch.zeros(16, 32, dtype=torch.uint8), scales=torch.zeros(16, 2, dtype=torch.uint8),
                shape=(16, 64), layout=Layout.PLAIN)
    args.update(kw)
    return MXFP4Tensor(**args)


def _linear(fn):
    from torch import nn

    from mxfp4.nn import MXFP4Linear

    return fn(MXFP4Linear, nn)


def _task(fn):
    from mxfp4 import task

    return fn(task)


def _q(shape=(16, 64)):
    import mxfp4

    return mxfp4.quantize(torch.randn(*shape))


BAD_INPUTS: tuple[BadInput, ...] = (
    # mxfp4.gemm_a4w4
    BadInput("gemm_a4w4(a=None, w)", lambda: _gemm(a=None), TypeError, "a must be a torch.Tensor"),
    BadInput("gemm_a4w4(a=[[1.0] * 128] * 4, w)", lambda: _gemm(a=[[1.0] * 128] * 4), TypeError, "a must be"),
    BadInput("gemm_a4w4(a int32, w)", lambda: _gemm(a=lambda a, w: a.int()), TypeError, "a must be bfloat16"),
    BadInput("gemm_a4w4(a float64, w)", lambda: _gemm(a=lambda a, w: a.double()), TypeError, "a must be bfloat16"),
    BadInput("gemm_a4w4(a 0-D, w)", lambda: _gemm(a=torch.tensor(1.0)), ValueError, "a must have shape"),
    BadInput("gemm_a4w4(a [4, 64], w [32, 128])", lambda: _gemm(a=lambda a, w: a[:, :64]), ValueError, "a.shape[-1]"),
    BadInput("gemm_a4w4(a [4, 100], w [32, 128]) (K % 32 != 0)", lambda: _gemm(a=torch.randn(4, 100).bfloat16()),
             ValueError, "a.shape[-1]"),
    BadInput("gemm_a4w4(a, w=None)", lambda: _gemm(w=None), TypeError, "w must be an MXFP4Tensor"),
    BadInput("gemm_a4w4(a, w=w.data)", lambda: _gemm(w=lambda a, w: w.data), TypeError, "w must be an MXFP4Tensor"),
    BadInput("gemm_a4w4(a [128], w 1-D MXFP4Tensor [128])",
             lambda: _gemm(a=lambda a, w: a[0], w=lambda a, w: _q((128,))), ValueError, "w must be a 2-D"),
    BadInput("gemm_a4w4(a, w 3-D MXFP4Tensor [2, 32, 128])", lambda: _gemm(w=lambda a, w: _q((2, 32, 128))),
             ValueError, "w must be a 2-D"),
    BadInput("gemm_a4w4(a on meta, w on cpu)", lambda: _gemm(a=lambda a, w: a.to("meta")), ValueError,
             "a (meta) and w (cpu)"),
    BadInput("gemm_a4w4(a, w, out=[])", lambda: _gemm(out=[]), TypeError, "out must be a torch.Tensor"),
    BadInput("gemm_a4w4(a, w, out int32)", lambda: _gemm(out=torch.empty(4, 32, dtype=torch.int32)), ValueError,
             "out must be bfloat16, float16 or float32"),
    BadInput("gemm_a4w4(a, w, out float32, out_dtype=torch.float16)",
             lambda: _gemm(out=torch.empty(4, 32), out_dtype=torch.float16), ValueError,
             "out (torch.float32) and out_dtype"),
    BadInput("gemm_a4w4(a, w, out_dtype=torch.int8)",
             lambda: _gemm(out_dtype=torch.int8), TypeError, "out_dtype must be"),
    BadInput("gemm_a4w4(a, w, out [4, 16])", lambda: _gemm(out=torch.empty(4, 16, dtype=torch.bfloat16)), ValueError,
             "of shape (4, 32)"),
    BadInput("gemm_a4w4(a, w, out on meta)", lambda: _gemm(out=torch.empty(4, 32, dtype=torch.bfloat16, device="meta")),
             ValueError, "out (meta)"),
    BadInput("gemm_a4w4(a, w, out non-contiguous)",
             lambda: _gemm(out=torch.empty(32, 4, dtype=torch.bfloat16).t()), ValueError, "out must be contiguous"),
    BadInput("gemm_a4w4(a [4, 128], w [128, 128], out=a)",
             lambda: _gemm(w=lambda a, w: _q((128, 128)), out=lambda a, w: a), ValueError, "out must not overlap a"),
    BadInput("gemm_a4w4(a, w, out sharing w.data's memory)", _out_overlapping_w, ValueError,
             "out must not overlap w.data"),
    BadInput("gemm_a4w4(a, w, backend='triton')", lambda: _gemm(backend="triton"), ValueError,
             "backend must be one of"),
    BadInput("gemm_a4w4(a, w, backend=None)", lambda: _gemm(backend=None), ValueError, "backend must be one of"),
    BadInput("gemm_a4w4(a on cpu, w, backend='cuda')", lambda: _gemm(backend="cuda"), ValueError, "backend='cuda'"),
    BadInput("gemm_a4w4(a, w, params={'bn': 64})", lambda: _gemm(params={"bn": 64}), TypeError, "params must be"),
    BadInput("gemm_a4w4(a, w, params=GemmParams(out_f32=True))", lambda: _gemm(params=_float32_params()), ValueError,
             "params.out_f32 variants write the unrounded float32 total"),
    # quantize, dequantize, prepare
    BadInput("quantize(None)", lambda: _ops()[0].quantize(None), TypeError, "x must be a torch.Tensor"),
    BadInput("quantize(x int32)", lambda: _ops()[0].quantize(torch.zeros(4, 32, dtype=torch.int32)), TypeError,
             "x must be bfloat16"),
    BadInput("quantize(x 0-D)", lambda: _ops()[0].quantize(torch.tensor(1.0)), ValueError, "x must have at least"),
    BadInput("quantize(x [4, 33])", lambda: _ops()[0].quantize(torch.randn(4, 33)), ValueError, "x.shape[-1]"),
    BadInput("quantize(x, scale_rule='aiter')", lambda: _ops()[0].quantize(torch.randn(4, 32), "aiter"), TypeError,
             "scale_rule must be a ScaleRule"),
    BadInput("dequantize(torch.Tensor)", lambda: _ops()[0].dequantize(torch.zeros(4, 16, dtype=torch.uint8)),
             TypeError, "t must be an MXFP4Tensor"),
    BadInput("dequantize(t, torch.bfloat16)", lambda: _ops()[0].dequantize(_q(), torch.bfloat16), TypeError,
             "dtype must be"),
    BadInput("prepare(torch.Tensor)", lambda: _ops()[0].prepare(torch.zeros(16, 32, dtype=torch.uint8)), TypeError,
             "w must be an MXFP4Tensor"),
    BadInput("prepare(w 3-D [2, 16, 64])", lambda: _ops()[0].prepare(_q((2, 16, 64))), ValueError, "w must be a 2-D"),
    BadInput("t.to_layout('plain')", lambda: _q().to_layout("plain"), TypeError, "layout must be a mxfp4.Layout"),
    BadInput("t.to_layout(None)", lambda: _q().to_layout(None), TypeError, "layout must be a mxfp4.Layout"),
    # MXFP4Tensor
    BadInput("MXFP4Tensor(data float32, ...)", lambda: _tensor(data=torch.zeros(16, 32)), TypeError,
             "MXFP4Tensor.data must be uint8"),
    BadInput("MXFP4Tensor(data, scales=None, ...)", lambda: _tensor(scales=None), TypeError,
             "MXFP4Tensor.scales must be a torch.Tensor"),
    BadInput("MXFP4Tensor(..., scales [16, 1])", lambda: _tensor(scales=torch.zeros(16, 1, dtype=torch.uint8)),
             ValueError, "MXFP4Tensor.scales must have shape"),
    BadInput("MXFP4Tensor(..., data [16, 31])", lambda: _tensor(data=torch.zeros(16, 31, dtype=torch.uint8)),
             ValueError, "MXFP4Tensor.data must have shape"),
    BadInput("MXFP4Tensor(..., shape=(16, 48))", lambda: _tensor(shape=(16, 48)), ValueError, "MXFP4Tensor.shape"),
    BadInput("MXFP4Tensor(..., layout='plain')", lambda: _tensor(layout="plain"), TypeError, "MXFP4Tensor.layout"),
    BadInput("MXFP4Tensor(..., scale_rule=None)", lambda: _tensor(scale_rule=None), TypeError,
             "MXFP4Tensor.scale_rule"),
    BadInput("MXFP4Tensor(data on meta, scales on cpu, ...)",
             lambda: _tensor(data=torch.zeros(16, 32, dtype=torch.uint8, device="meta")),
             ValueError, "MXFP4Tensor.data (meta)"),
    BadInput("MXFP4Tensor(data [8, 32], ..., shape=(8, 64), layout=AITER_SHUFFLED) (not padded to 16 rows)",
             lambda: _tensor(data=torch.zeros(8, 32, dtype=torch.uint8), shape=(8, 64),
                             layout=_ops()[0].Layout.AITER_SHUFFLED), ValueError, "MXFP4Tensor.data must have shape"),
    # MXFP4Linear
    BadInput("MXFP4Linear.from_linear(None)", lambda: _linear(lambda L, nn: L.from_linear(None)), TypeError,
             "linear must be a torch.nn.Linear"),
    BadInput("MXFP4Linear.from_linear(nn.Linear(48, 16))",
             lambda: _linear(lambda L, nn: L.from_linear(nn.Linear(48, 16))),
             ValueError, "linear.in_features (48)"),
    BadInput("MXFP4Linear.from_linear(nn.Conv1d(64, 16, 1))",
             lambda: _linear(lambda L, nn: L.from_linear(nn.Conv1d(64, 16, 1))), TypeError, "linear must be"),
    BadInput("MXFP4Linear.from_mxfp4(None)", lambda: _linear(lambda L, nn: L.from_mxfp4(None)), TypeError,
             "weight must be"),
    BadInput("MXFP4Linear.from_mxfp4(w [16, 64], bias [8])",
             lambda: _linear(lambda L, nn: L.from_mxfp4(_q(), torch.zeros(8))), ValueError, "bias must be"),
    BadInput("MXFP4Linear(...)(x int32)",
             lambda: _linear(lambda L, nn: L.from_mxfp4(_q())(torch.zeros(2, 64, dtype=torch.int32))), TypeError,
             "a must be bfloat16"),
    BadInput("MXFP4Linear(...)(x [2, 32]) (in_features 64)",
             lambda: _linear(lambda L, nn: L.from_mxfp4(_q())(torch.zeros(2, 32, dtype=torch.bfloat16))), ValueError,
             "a.shape[-1]"),
    # torch.ops.mxfp4.gemm_a4w4
    BadInput("torch.ops.mxfp4.gemm_a4w4(a, w.data, w.scales, n=16 (w has 32 rows), ...)",
             lambda: torch.ops.mxfp4.gemm_a4w4(_ops()[1], _ops()[2].data, _ops()[2].scales, 16, 128, True, False),
             ValueError, "MXFP4Tensor.data must have shape"),
    # mxfp4.task
    BadInput("custom_kernel(None)", lambda: _task(lambda t: t.custom_kernel(None)), TypeError, "data must be"),
    BadInput("custom_kernel((A, B, B_q, B_shuffle))", lambda: _task(lambda t: t.custom_kernel((None,) * 4)), TypeError,
             "data must be"),
    BadInput("custom_kernel(data with A 1-D)",
             lambda: _task(lambda t: t.custom_kernel((torch.zeros(64),) + t.generate_input(8, 32, 64, 1, "cpu")[1:])),
             ValueError, "A must be a 2-D"),
    BadInput("custom_kernel(data with B_scale_sh [256, 1], k = 64)",
             lambda: _task(lambda t: t.custom_kernel(t.generate_input(8, 32, 64, 1, "cpu")[:4]
                                                     + (torch.zeros(256, 1, dtype=torch.uint8),))),
             ValueError, "B_scale_sh"),
    BadInput("generate_input(8, 32, 100, 1, 'cpu') (k % 64 != 0)",
             lambda: _task(lambda t: t.generate_input(8, 32, 100, 1, "cpu")), ValueError, "k must be a multiple of 64"),
    BadInput("generate_input(0, 32, 64, 1, 'cpu')", lambda: _task(lambda t: t.generate_input(0, 32, 64, 1, "cpu")),
             ValueError, "m must be a positive int"),
    BadInput("generate_input(8.0, 32, 64, 1, 'cpu')", lambda: _task(lambda t: t.generate_input(8.0, 32, 64, 1, "cpu")),
             ValueError, "m must be a positive int"),
    BadInput("custom_kernel((A, B, B_q, None, B_scale_sh))",
             lambda: _task(lambda t: t.custom_kernel(t.generate_input(8, 32, 64, 1, "cpu")[:3]
                                                     + (None, torch.zeros(256, 8, dtype=torch.uint8)))),
             TypeError, "B_shuffle"),
    BadInput("custom_kernel(data with A [8, 32] for a k = 64 weight)",
             lambda: _task(lambda t: t.custom_kernel((torch.zeros(8, 32, dtype=torch.bfloat16),)
                                                     + t.generate_input(8, 32, 64, 1, "cpu")[1:])),
             ValueError, "A.shape"),
    BadInput("MXFP4Tensor(data, scales, shape=None)", lambda: _tensor(shape=None), TypeError, "MXFP4Tensor.shape"),
    BadInput("MXFP4Tensor(data, scales, shape=(16.5, 64))", lambda: _tensor(shape=(16.5, 64)), TypeError,
             "MXFP4Tensor.shape"),
    BadInput("gemm_a4w4(a [4, 0], w [16, 0]) (K = 0)",
             lambda: _gemm(a=torch.zeros(4, 0, dtype=torch.bfloat16),
                           w=lambda a, w: _tensor(data=torch.zeros(16, 0, dtype=torch.uint8),
                                                  scales=torch.zeros(16, 0, dtype=torch.uint8), shape=(16, 0))),
             ValueError, "K"),
    BadInput("generate_input(8, 32, 64, 'x', 'cpu')", lambda: _task(lambda t: t.generate_input(8, 32, 64, "x", "cpu")),
             ValueError, "seed"),
    # bias (added before the one rounding)
    BadInput("gemm_a4w4(a, w, bias=[0.0] * 32)", lambda: _gemm(bias=[0.0] * 32), TypeError,
             "bias must be a torch.Tensor"),
    BadInput("gemm_a4w4(a, w, bias int32 [32])", lambda: _gemm(bias=torch.zeros(32, dtype=torch.int32)), TypeError,
             "bias must be bfloat16, float16 or float32"),
    BadInput("gemm_a4w4(a, w [32, 128], bias [16])", lambda: _gemm(bias=torch.zeros(16)), ValueError,
             "bias must have shape (32,)"),
    BadInput("gemm_a4w4(a, w, bias on meta)", lambda: _gemm(bias=torch.zeros(32, device="meta")), ValueError,
             "bias (meta) must be on a's device"),
    BadInput("grouped_gemm_a4w4(a, experts (2 of [40, 64]), offsets, bias [40])", lambda: _grouped_bias(), ValueError,
             "bias must be a tensor [2, 40]"),
    # a checkpoint's quantization_config
    BadInput("quark_config(... shared_scale_groups=[['*q_proj', '*k_proj']])",
             lambda: _quark_config(shared_scale_groups=[["*q_proj", "*k_proj"]]), ValueError,
             "quantization_config.shared_scale_groups"),
    BadInput("quark_config(... kv_cache_quant_config={'*k_proj': {... 'output_tensors': {'dtype': 'int8', ...}}})",
             lambda: _quark_config(kv_cache_quant_config={"*k_proj": {"output_tensors": {"dtype": "int8",
                                                                                          "qscheme": "per_tensor"}}}),
             ValueError, "kv_cache_quant_config['*k_proj'].output_tensors.dtype"),
)


def _grouped_bias():
    import mxfp4

    experts = mxfp4.ExpertWeights.stack([mxfp4.quantize(torch.randn(40, 64)) for _ in range(2)])
    return mxfp4.grouped_gemm_a4w4(torch.randn(3, 64).bfloat16(), experts, torch.tensor([1, 3], dtype=torch.int32),
                                   bias=torch.zeros(40))


def _quark_config(**fields):
    from mxfp4.checkpoint import export_config, quark_config

    return quark_config({"quantization_config": {**export_config(["lm_head"]), **fields}})


def outcome(row: BadInput) -> tuple[type | None, str]:
    """(exception type or None, first line of its message) of running ``row``."""
    try:
        row.run()
    except Exception as e:  # the table records whatever comes out
        return type(e), (str(e).splitlines() or [""])[0]
    return None, ""


def markdown_table() -> str:
    """docs/bad_inputs.md: each bad input, the exception it gets and the message."""
    lines = ["# Bad inputs and what they get", "",
             "Generated by `python -m mxfp4.fuzz --bad-inputs-table` from `mxfp4.bad_inputs.BAD_INPUTS`; "
             "`tests/test_bad_inputs.py` checks every row and that this file is up to date.", "",
             "| # | call | raises | message | open defect |", "|---|---|---|---|---|"]
    for i, row in enumerate(BAD_INPUTS):
        kind, message = outcome(row)
        name = kind.__name__ if kind else "nothing raised"
        cell = message.replace("|", "\\|").replace("`", "'")
        lines.append(f"| {i + 1} | `{row.call.replace('|', '/')}` | {name} | {cell} | {row.defect} |")
    return "\n".join(lines) + "\n"
