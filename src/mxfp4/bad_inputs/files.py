"""The bad-input rows' setups that write files: a model saved in a temporary directory (its header or config
edited), a benchmark recorded into a directory, the README's recipe saved and reloaded."""
from __future__ import annotations

import torch


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
