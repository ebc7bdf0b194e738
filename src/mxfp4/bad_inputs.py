"""Every bad input tried on the public API, with the exception it must raise and the argument its
message must name. ``tests/test_bad_inputs.py`` checks each row; ``docs/bad_inputs.md`` is
:func:`markdown_table` (``python -m mxfp4.bad_inputs``), and a test keeps the two equal. The rows call
every layer, the command line included: nothing in the package imports this module.
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
    raises: type | None         # None: the call has a correct result, and ``run`` returns its description
    names: str                  # text the message (or the result's description) must contain
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


def _in_dir(fn):
    """``fn(directory)`` in a fresh temporary directory; the directory's name reads ``DIR`` in a message (the
    table stays the same from run to run)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        try:
            return fn(d)
        except (TypeError, ValueError) as e:
            raise type(e)(str(e).replace(d, "DIR")) from None


def _saved(d: str):
    """A two-layer model quantized and saved in ``d``; returns (model, checkpoint directory)."""
    import pathlib

    from torch import nn

    import mxfp4

    torch.manual_seed(0)
    model = mxfp4.quantize_(nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 32)).bfloat16())
    return model, mxfp4.save(model, pathlib.Path(d) / "ckpt", config={"model_type": "test"})


def _edit_header(d: str, edit) -> str:
    """The checkpoint of :func:`_saved` with its safetensors header's JSON text passed through ``edit``."""
    import json
    import struct

    _, path = _saved(d)
    file = path / "model.safetensors"
    raw = file.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    text = edit(json.dumps(json.loads(raw[8:8 + n]))).encode()
    text += b" " * (-len(text) % 8)
    file.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])
    return path


def _header_dtype(value):
    import json

    from mxfp4 import checkpoint

    def edit(text):
        header = json.loads(text)
        header["0.weight"]["dtype"] = value
        return json.dumps(header)

    return _in_dir(lambda d: checkpoint.load(_edit_header(d, edit)))


def _duplicate_tensor():
    from mxfp4 import checkpoint

    def edit(text):  # the entry of 0.bias written a second time, at the end of the object
        import json

        entry = json.dumps(json.loads(text)["0.bias"])
        return text[:-1] + f', "0.bias": {entry}}}'

    return _in_dir(lambda d: checkpoint.load(_edit_header(d, edit)))


def _metadata(value):
    import json

    from mxfp4 import checkpoint

    def edit(text):
        header = json.loads(text)
        header["__metadata__"] = value
        return json.dumps(header)

    return _in_dir(lambda d: checkpoint.load(_edit_header(d, edit)))


def _gptoss_config(value):
    import json

    from mxfp4 import checkpoint

    def run(d):
        _, path = _saved(d)
        (path / "config.json").write_text(json.dumps({"quantization_config": value}))
        return checkpoint.load_gptoss_experts(path)

    return _in_dir(run)


def _reload_loaded():
    import mxfp4

    def run(d):
        model, path = _saved(d)
        return mxfp4.quantize_(model, checkpoint=path)

    return _in_dir(run)


def _record_dir():
    """``mxfp4 bench --record DIR``: its exit status and message, which come before any shape is timed."""
    import contextlib
    import io

    from mxfp4 import cli

    def run(d):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = cli.main(["bench", "--shapes", "1,16,64", "--record", d])
        return f"exit status {status}: {err.getvalue().strip()}".replace(d, "DIR")

    return _in_dir(run)


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


def _recipe_round_trip() -> str:
    """The README's recipe on a tiny Llama: logits over 64 positions before a save and after a meta reload."""
    import transformers

    import mxfp4

    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    ids = torch.randint(0, 256, (1, 64), generator=torch.Generator().manual_seed(7))
    torch.manual_seed(0)
    model = mxfp4.quantize_(transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval())

    def run(d):
        path = mxfp4.save(model, d)
        with torch.device("meta"):
            loaded = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        mxfp4.quantize_(loaded, checkpoint=path)
        with torch.no_grad():
            return torch.equal(model(ids).logits, loaded.eval()(ids).logits)

    return f"logits after the reload equal: {_in_dir(run)}"


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
    BadInput("gemm_a4w4(a, w, params=SmallParams(out_f32=True))", lambda: _gemm(params=_float32_params()), ValueError,
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
    BadInput("MXFP4Tensor(data [16, 0], scales [16, 0], shape=(16, 0)) (K = 0)",
             lambda: _tensor(data=torch.zeros(16, 0, dtype=torch.uint8), scales=torch.zeros(16, 0, dtype=torch.uint8),
                             shape=(16, 0)), ValueError, "MXFP4Tensor.shape (16, 0) must end in K > 0"),
    BadInput("generate_input(8, 32, 64, 'x', 'cpu')", lambda: _task(lambda t: t.generate_input(8, 32, 64, "x", "cpu")),
             ValueError, "seed"),
    # checkpoints: headers and configs of the wrong JSON type, names twice, the entry points' arguments
    BadInput("checkpoint.load(dir) with a header dtype [] (a list)", lambda: _header_dtype([]), ValueError,
             "tensor '0.weight': dtype [] is not a safetensors dtype"),
    BadInput("checkpoint.load(dir) with a header dtype {} (an object)", lambda: _header_dtype({}), ValueError,
             "tensor '0.weight': dtype {} is not a safetensors dtype"),
    BadInput("checkpoint.load(dir) with a header naming tensor '0.bias' twice", _duplicate_tensor, ValueError,
             "model.safetensors: the safetensors header names '0.bias' twice"),
    BadInput("checkpoint.load(dir) with a header __metadata__ [] (a list)", lambda: _metadata([]), ValueError,
             "__metadata__ [] must be an object of strings"),
    BadInput("load_gptoss_experts(dir) with quantization_config 'mxfp4' (a string)", lambda: _gptoss_config("mxfp4"),
             ValueError, "config.json: quantization_config 'mxfp4' must be an object"),
    BadInput("load_gptoss_experts(dir) with quantization_config [] (a list)", lambda: _gptoss_config([]),
             ValueError, "quantization_config [] must be an object"),
    BadInput("Checkpoint.tensor('missing')", lambda: _in_dir(lambda d: _ops()[0].load(_saved(d)[1]).tensor("missing")),
             ValueError, "has no tensor 'missing'"),
    BadInput("Checkpoint.tensor(0)", lambda: _in_dir(lambda d: _ops()[0].load(_saved(d)[1]).tensor(0)),
             TypeError, "name must be a tensor name (str)"),
    BadInput("save(model, dir, config='not a dict')",
             lambda: _in_dir(lambda d: _ops()[0].save(_saved(d)[0], d, config="not a dict")), TypeError,
             "config must be a dict"),
    BadInput("save(model, dir, max_shard_size='infGB')",
             lambda: _in_dir(lambda d: _ops()[0].save(_saved(d)[0], d, max_shard_size="infGB")), ValueError,
             "max_shard_size must be a positive number of bytes"),
    BadInput("save(None, dir)", lambda: _in_dir(lambda d: _ops()[0].save(None, d)), TypeError,
             "model must be a torch.nn.Module"),
    BadInput("quantize_(model loaded from dir, checkpoint=dir) (loaded twice)", _reload_loaded, ValueError,
             "layer '0' is already a MXFP4Linear"),
    BadInput("quantize_(model, checkpoint=dir, scale_rule=ScaleRule.FLOOR)",
             lambda: _in_dir(lambda d: _ops()[0].quantize_(_saved(d)[0], checkpoint=d,
                                                           scale_rule=_ops()[0].ScaleRule.FLOOR)),
             TypeError, "scale_rule= goes without checkpoint="),
    BadInput("quantize_(model, checkpoint=42)",
             lambda: _ops()[0].quantize_(torch.nn.Sequential(torch.nn.Linear(64, 64)), checkpoint=42), TypeError,
             "checkpoint must be a directory"),
    # quantize_: a layer under two names, a layer of another dtype
    BadInput("quantize_(m) with m.b = m.a (one nn.Linear, two names)", _shared_layer, None,
             "MXFP4Linear under both names: True"),
    BadInput("quantize_(m) with m.lm_head = m.a (the default filter keeps lm_head)", _shared_head, ValueError,
             "layer 'a' is also the model's 'lm_head'"),
    BadInput("quantize_(nn.Sequential(nn.Linear(64, 32).double()))",
             lambda: _ops()[0].quantize_(torch.nn.Sequential(torch.nn.Linear(64, 32).double())), ValueError,
             "layer '0' is torch.float64"),
    # every public entry point on meta tensors: the output's shape and dtype, as the op's fake gives them
    BadInput("quantize(x on meta)", lambda: _meta(_ops()[0].quantize(torch.randn(4, 128, device="meta"))), None,
             "meta MXFP4Tensor PLAIN (4, 128)"),
    BadInput("dequantize(t on meta)", lambda: _meta(_ops()[0].dequantize(_on_meta(_q()))), None,
             "meta torch.float32 (16, 64)"),
    BadInput("prepare(w on meta)", lambda: _meta(_ops()[0].prepare(_on_meta(_q()))), None,
             "meta MXFP4Tensor AITER_SHUFFLED (16, 64)"),
    BadInput("gemm_a4w4(a on meta, w on meta)", lambda: _meta(_gemm(a=lambda a, w: a.to("meta"),
                                                                     w=lambda a, w: _on_meta(w))),
             None, "meta torch.bfloat16 (4, 32)"),
    BadInput("gemm_a4w4(a [2, 2, 128] on meta, w on meta, out_dtype=torch.float16)",
             lambda: _meta(_gemm(a=lambda a, w: a.view(2, 2, 128).to("meta"), w=lambda a, w: _on_meta(w),
                                 out_dtype=torch.float16)), None, "meta torch.float16 (2, 2, 32)"),
    BadInput("torch.ops.mxfp4.gemm_a4w4(a on meta, ...)",
             lambda: _meta(torch.ops.mxfp4.gemm_a4w4(_ops()[1].to("meta"), _on_meta(_ops()[2]).data,
                                                     _on_meta(_ops()[2]).scales, 32, 128, True, False)),
             None, "meta torch.bfloat16 (4, 32)"),
    BadInput("ops.gemm_a4w4_partial(a on meta, w on meta)",
             lambda: _meta(__import__("mxfp4.ops").ops.gemm_a4w4_partial(_ops()[1].to("meta"), _on_meta(_ops()[2]))),
             None, "meta torch.float32 (4, 32)"),
    BadInput("MXFP4Linear(...).to('meta')(x on meta)",
             lambda: _linear(lambda L, nn: _meta(L.from_mxfp4(_q(), torch.zeros(16)).to("meta")(
                 torch.randn(3, 64, device="meta").bfloat16()))), None, "meta torch.bfloat16 (3, 16)"),
    BadInput("grouped_gemm_a4w4(a on meta, experts on meta, offsets on meta)",
             lambda: _meta(_ops()[0].grouped_gemm_a4w4(
                 torch.randn(7, 64, device="meta").bfloat16(),
                 _ops()[0].ExpertWeights.stack([_on_meta(_q((40, 64))) for _ in range(4)]),
                 torch.tensor([2, 2, 3, 7], device="meta"))), None, "meta torch.bfloat16 (7, 40)"),
    BadInput("MXFP4Experts(...).to('meta')(hidden_states, top_k_index, top_k_weights on meta)",
             lambda: _meta(_experts("meta")[0](*_experts("meta")[1])), None, "meta torch.bfloat16 (5, 64)"),
    BadInput("custom_kernel(data on meta)",
             lambda: _meta(_task(lambda t: t.custom_kernel(tuple(x.to("meta") for x in
                                                                 t.generate_input(8, 32, 64, 1, "cpu"))))),
             None, "meta torch.bfloat16 (8, 32)"),
    BadInput("quantize_(model built on meta)(x on meta)", _meta_model, None,
             "MXFP4Linear, MXFP4Linear; output meta torch.bfloat16 (3, 32)"),
    BadInput("generate_input(8, 32, 64, 1, 'meta')", lambda: _task(lambda t: t.generate_input(8, 32, 64, 1, "meta")),
             ValueError, "device must be a cpu or cuda device"),
    # mixture of experts
    BadInput("MXFP4Experts(...)(h, top_k_index float32, w)",
             lambda: _experts()[0](_experts()[1][0], _experts()[1][1].float(), _experts()[1][2]), TypeError,
             "top_k_index must be int32 or int64"),
    BadInput("MXFP4Experts(...)(h, top_k_index a list, w)",
             lambda: _experts()[0](_experts()[1][0], _experts()[1][1].tolist(), _experts()[1][2]), TypeError,
             "top_k_index must be a torch.Tensor"),
    BadInput("ExpertWeights.stack([w on cpu, w on meta])",
             lambda: _ops()[0].ExpertWeights.stack([_q(), _on_meta(_q())]), ValueError,
             "experts[1] is on meta, experts[0] on cpu"),
    # .to() dtypes of the layers holding MXFP4 bytes
    BadInput("MXFP4Linear(...).double()", lambda: _linear(lambda L, nn: L.from_mxfp4(_q()).double()), TypeError,
             "MXFP4Linear's dtype (its output's and bias's) must be one of torch.bfloat16, torch.float16, "
             "torch.float32"),
    BadInput("MXFP4Linear(...).to(torch.float64)",
             lambda: _linear(lambda L, nn: L.from_mxfp4(_q()).to(torch.float64)), TypeError, "asked for torch.float64"),
    BadInput("MXFP4Linear(...).type(torch.float16)",
             lambda: _linear(lambda L, nn: L.from_mxfp4(_q()).type(torch.float16)), TypeError,
             "keeps its MXFP4 codes and scales as uint8 bytes"),
    BadInput("MXFP4Experts(...).double()", lambda: _experts()[0].double(), TypeError,
             "MXFP4Experts's dtype (its output's and bias's) must be one of"),
    BadInput("ColumnParallelMXFP4Linear(...).half()", lambda: _column_layer().half(), TypeError,
             "ColumnParallelMXFP4Linear's dtype (its output's and bias's) must be one of torch.bfloat16;"),
    # the rest
    BadInput("custom_kernel(data with B_scale_sh float32)",
             lambda: _task(lambda t: t.custom_kernel(t.generate_input(8, 32, 64, 1, "cpu")[:4]
                                                     + (torch.zeros(256, 2),))),
             TypeError, "B_scale_sh must hold one e8m0 scale a byte (uint8 or float8_e8m0fnu), got torch.float32"),
    BadInput("quantize(x [4, 0]) (K = 0)", lambda: _ops()[0].quantize(torch.zeros(4, 0)), ValueError,
             "x.shape[-1] (K = 0) must be a positive multiple of 32"),
    BadInput("gemm_a4w4(a [4, 0], w [32, 128]) (K = 0)", lambda: _gemm(a=torch.zeros(4, 0, dtype=torch.bfloat16)),
             ValueError, "a.shape[-1] (K = 0) must equal w's K (128)"),
    BadInput("t.to_layout(AITER_SHUFFLED) for t [2, 16, 64]",
             lambda: _q((2, 16, 64)).to_layout(_ops()[0].Layout.AITER_SHUFFLED), ValueError,
             "to_layout(AITER_SHUFFLED): the shuffled layout is a 2-D weight's"),
    BadInput("gemm_a4w4(a, w, out requiring grad)",
             lambda: _gemm(out=torch.zeros(4, 32, dtype=torch.bfloat16, requires_grad=True)), ValueError,
             "out requires grad"),
    BadInput("mxfp4 bench --record DIR (a directory)", _record_dir, None,
             "exit status 2: mxfp4 bench: --record 'DIR' is a directory: it must name a file"),
    # what a user sees, explained
    BadInput("the README's model recipe (dtype=torch.bfloat16): quantize_, save, reload on meta", _recipe_round_trip,
             None, "logits after the reload equal: True"),
    BadInput("bench-model's table when compiled tokens differ from eager's", _compile_note, None,
             "tokens = eager False under compile: torch.compile fuses and reorders"),
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
    """(exception type, first line of its message), or (None, the description ``run`` returned)."""
    try:
        result = row.run()
    except Exception as e:  # the table records whatever comes out
        return type(e), (str(e).splitlines() or [""])[0]
    return None, result if isinstance(result, str) else ""


def markdown_table() -> str:
    """docs/bad_inputs.md: each bad input, the exception it gets and the message."""
    lines = ["# Bad inputs and what they get", "",
             "Generated by `python -m mxfp4.bad_inputs` from `mxfp4.bad_inputs.BAD_INPUTS`; "
             "`tests/test_bad_inputs.py` checks every row and that this file is up to date.", "",
             "A row that raises nothing gives a correct result, described in the message column.", "",
             "| # | call | raises | message | open defect |", "|---|---|---|---|---|"]
    for i, row in enumerate(BAD_INPUTS):
        kind, message = outcome(row)
        name = kind.__name__ if kind else "a result"
        cell = message.replace("|", "\\|").replace("`", "'")
        lines.append(f"| {i + 1} | `{row.call.replace('|', '/')}` | {name} | {cell} | {row.defect} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
