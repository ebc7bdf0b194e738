"""Every field of every JSON file of a checkpoint (config.json's quantization_config, the safetensors header,
the index), replaced by a value of every JSON type: the load refuses it by name, or gives the saved model,
and a refused load leaves the model as it was; a JSON object naming a key twice is refused."""
import json

import pytest
import torch

import mxfp4
from mxfp4 import checkpoint

from .checkpoints import assert_unchanged, snapshot


JSON_VALUES = ([], {}, 1.5, 7, True, None, "x", [1], {"a": 1})


def _json_paths(value, prefix=()):
    """Every path (a tuple of keys and indices) into a JSON value, the value's own included."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _json_paths(child, prefix + (key,))


def _replaced(value, path, new):
    if not path:
        return new
    value = json.loads(json.dumps(value))
    node = value
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return value


@pytest.fixture(scope="module")
def small_checkpoints(tmp_path_factory):
    """A two-layer model saved whole and in shards (index.json), with the bytes of each JSON file."""
    torch.manual_seed(0)
    model = mxfp4.quantize_(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 32)).bfloat16())
    root = tmp_path_factory.mktemp("json")
    whole = mxfp4.save(model, root / "whole", config={"model_type": "test"})
    sharded = mxfp4.save(model, root / "sharded", config={"model_type": "test"}, max_shard_size=3000)
    assert (sharded / "model.safetensors.index.json").exists()
    return whole, sharded


def _fresh_model():
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 32)).bfloat16()


def _load_refused_or_right(path, what: str):
    """Loading ``path`` gives the saved model or a ValueError / TypeError naming ``what``; the model as it was."""
    model = _fresh_model()
    before = snapshot(model)
    try:
        mxfp4.quantize_(model, checkpoint=path)
    except (ValueError, TypeError) as e:
        assert what in str(e), f"the message does not name {what!r}: {e}"
        assert_unchanged(model, before)


def test_every_config_field_of_every_json_type_is_refused_by_name(small_checkpoints, tmp_path):
    whole, _ = small_checkpoints
    config = json.loads((whole / "config.json").read_text())
    paths = list(_json_paths(config["quantization_config"], ("quantization_config",)))
    assert len(paths) > 40
    for i, path in enumerate(paths):
        for value in JSON_VALUES:
            bad = tmp_path / f"c{i}"
            if not bad.exists():
                bad.mkdir()
                for f in whole.iterdir():
                    (bad / f.name).write_bytes(f.read_bytes())
            (bad / "config.json").write_text(json.dumps(_replaced(config, path, value)))
            key = next((str(k) for k in reversed(path) if isinstance(k, str)), "quantization_config")
            # a spec that is valid JSON but another layer kind names the tensor it then disagrees with
            model = _fresh_model()
            try:
                mxfp4.quantize_(model, checkpoint=bad)
            except (ValueError, TypeError) as e:
                assert key in str(e) or "checkpoint tensor" in str(e), f"{path} = {value!r}: {e}"


def test_every_header_and_index_field_of_every_json_type_is_refused_by_name(small_checkpoints, tmp_path):
    whole, sharded = small_checkpoints
    raw = (whole / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for i, path in enumerate(p for p in _json_paths(header) if p):
        for j, value in enumerate(JSON_VALUES):
            text = json.dumps(_replaced(header, path, value)).encode()
            text += b" " * (-len(text) % 8)
            bad = tmp_path / f"h{i}-{j}"
            bad.mkdir()
            (bad / "config.json").write_bytes((whole / "config.json").read_bytes())
            (bad / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + n:])
            _load_refused_or_right(bad, "model.safetensors")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    for i, path in enumerate(p for p in _json_paths(index) if p):
        for j, value in enumerate(JSON_VALUES):
            bad = tmp_path / f"i{i}-{j}"
            bad.mkdir()
            for f in sharded.iterdir():
                (bad / f.name).write_bytes(f.read_bytes())
            (bad / "model.safetensors.index.json").write_text(json.dumps(_replaced(index, path, value)))
            _load_refused_or_right(bad, "model.safetensors")


def test_a_json_object_naming_a_key_twice_is_refused(small_checkpoints, tmp_path):
    """The last entry would win in json.loads; safetensors refuses such a header, and so does every reader here."""
    whole, sharded = small_checkpoints
    raw = (whole / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    text = raw[8:8 + n].decode().rstrip()
    entry = json.dumps(json.loads(text)["1.bias"])
    twice = (text[:-1] + f',"1.bias":{entry}}}').encode()
    twice += b" " * (-len(twice) % 8)
    bad = tmp_path / "header"
    bad.mkdir()
    (bad / "model.safetensors").write_bytes(len(twice).to_bytes(8, "little") + twice + raw[8 + n:])
    with pytest.raises(ValueError, match=r"model.safetensors: the safetensors header names '1.bias' twice"):
        checkpoint.load(bad)
    for name, edit in (("config.json", lambda t: t[:-2] + ', "model_type": "again"}\n'),
                       ("model.safetensors.index.json", lambda t: t.replace('"weight_map": {', '"weight_map": {"0.bias": '
                                                                            '"model-00001-of-00002.safetensors", ', 1))):
        bad = tmp_path / name
        bad.mkdir()
        for f in sharded.iterdir():
            (bad / f.name).write_bytes(f.read_bytes())
        (bad / name).write_text(edit((sharded / name).read_text()))
        with pytest.raises(ValueError, match=rf"{name}: .* names '(model_type|0.bias)' twice"):
            checkpoint.load(bad)


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
def test_gptoss_reader_names_a_quantization_config_of_another_json_type(small_checkpoints, tmp_path, value):
    whole, _ = small_checkpoints
    for f in whole.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": value}))
    message = "has no '\\*_blocks' tensor" if value is None else "quantization_config"  # None: no config
    with pytest.raises(ValueError, match=message):
        checkpoint.load_gptoss_experts(tmp_path)
