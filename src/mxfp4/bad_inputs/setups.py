"""What the bad-input rows call on: operands, MXFP4 tensors, layers, experts and small models (each built on
the CPU or the meta device), and the calls that need more than a line."""
from __future__ import annotations

import torch


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

    return plan.SmallParams(out_f32=True)


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


def _meta(t) -> str:
    """The description of a correct meta-device result: device, dtype, shape."""
    if isinstance(t, torch.Tensor):
        return f"{t.device} {t.dtype} {tuple(t.shape)}"
    return f"{t.device} MXFP4Tensor {t.layout.name} {t.shape}"


def _on_meta(t):
    from mxfp4 import MXFP4Tensor

    if isinstance(t, MXFP4Tensor):
        return MXFP4Tensor(t.data.to("meta"), t.scales.to("meta"), t.shape, t.layout, t.scale_rule)
    return t.to("meta")


def _experts(device: str = "cpu"):
    """A small MXFP4Experts (4 experts, hidden 64, intermediate 32) and its inputs (5 tokens, top 2)."""
    from torch import nn

    from mxfp4 import moe

    torch.manual_seed(0)
    mlps = nn.ModuleList(nn.Module() for _ in range(4))
    for m in mlps:
        m.gate_proj, m.up_proj = nn.Linear(64, 32, bias=False), nn.Linear(64, 32, bias=False)
        m.down_proj, m.act_fn = nn.Linear(32, 64, bias=False), nn.SiLU()
    experts = moe.from_module(mlps).to(device)
    args = (torch.randn(5, 64).bfloat16(), torch.randint(0, 4, (5, 2)), torch.rand(5, 2).bfloat16())
    return experts, tuple(t.to(device) for t in args)


def _shared_head():
    from torch import nn

    import mxfp4

    model = nn.Module()
    model.a = nn.Linear(64, 32)
    model.lm_head = model.a
    return mxfp4.quantize_(model)


def _shared_layer():
    from torch import nn

    import mxfp4

    model = nn.Module()
    model.a = nn.Linear(64, 32)
    model.b = model.a
    mxfp4.quantize_(model)
    same = model.a is model.b
    return f"{type(model.a).__name__} under both names: {same}"


def _meta_model() -> str:
    from torch import nn

    import mxfp4

    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 32)).bfloat16()
    mxfp4.quantize_(model)
    y = model(torch.randn(3, 128, device="meta").bfloat16())
    return f"{', '.join(type(m).__name__ for m in model)}; output {_meta(y)}"


def _compile_note() -> str:
    from mxfp4.bench import llama, model

    row = {"model": "mxfp4", "mode": "compile", "tokens_per_s": 1.0, "ms_per_step": 1.0, "weight_bytes": 0,
           "peak_bytes": 0, "tokens_equal_eager": False, "compile_s": 1.0}
    check = {"gemm_outputs": 1, "gemm_bitident": 1.0, "gemm_violations": 0, "gemm_nonfinite_mismatch": 0,
             "logits_bitident": 1.0, "logits_max_abs_diff": 0.0}
    return next(line for line in model.report(llama.TINY, [row], check, "cpu").splitlines()
                if line == model.COMPILE_NOTE)


def _column_layer():
    from mxfp4.distributed import ColumnParallelMXFP4Linear

    return ColumnParallelMXFP4Linear.from_mxfp4(_q(), rank=0, world_size=1)


def _grouped_bias():
    import mxfp4

    experts = mxfp4.ExpertWeights.stack([mxfp4.quantize(torch.randn(40, 64)) for _ in range(2)])
    return mxfp4.grouped_gemm_a4w4(torch.randn(3, 64).bfloat16(), experts, torch.tensor([1, 3], dtype=torch.int32),
                                   bias=torch.zeros(40))


def _quark_config(**fields):
    from mxfp4.checkpoint import export_config, quark_config

    return quark_config({"quantization_config": {**export_config(["lm_head"]), **fields}})
