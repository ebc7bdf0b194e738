"""Checkpoints end to end on the CPU: a tiny Llama quantized, saved in Quark's format, loaded into a
fresh model; bad checkpoints and configs refused with the model left as it was; GPT-OSS experts."""
import json

import pytest
import torch

import mxfp4
from mxfp4 import checkpoint, formats
from mxfp4.nn import MXFP4Linear

transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402  (installed with transformers)


def tiny_llama(seed: int):
    """A Llama-style decoder (hidden 128, 2 layers, GQA) with random weights, bf16."""
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False)
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()


def logits(model) -> torch.Tensor:
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        return model(ids).logits


def snapshot(model):
    return ([type(m).__name__ for m in model.modules()],
            {k: v.clone() for k, v in model.state_dict().items()})


def assert_unchanged(model, before) -> None:
    types, state = snapshot(model)
    assert types == before[0]
    assert state.keys() == before[1].keys()
    assert all(torch.equal(state[k], before[1][k]) for k in state)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(directory, logits) of tiny_llama(0) quantized directly (its linear layers run the exact reference)."""
    model = mxfp4.quantize_(tiny_llama(0))
    path = mxfp4.save(model, tmp_path_factory.mktemp("quark"))
    return path, logits(model), model


def test_save_load_round_trip_is_bit_identical(saved, tmp_path):
    path, want, source = saved
    swapped = [n for n, m in source.named_modules() if isinstance(m, MXFP4Linear)]
    assert len(swapped) == 2 * 7 and "lm_head" not in swapped
    assert not torch.equal(want, logits(tiny_llama(0)))  # quantization changed the model

    model = tiny_llama(1)  # other random weights: everything must come from the checkpoint
    assert not torch.equal(logits(model), logits(tiny_llama(0)))
    mxfp4.quantize_(model, checkpoint=path)
    assert torch.equal(logits(model), want)
    ours, theirs = model.state_dict(), source.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)

    again = mxfp4.save(model, tmp_path / "again")
    assert (again / "model.safetensors").read_bytes() == (path / "model.safetensors").read_bytes()
    half = tiny_llama(1).half()  # the loaded layers take the model's dtype
    mxfp4.quantize_(half, checkpoint=path)
    assert {m.dtype for m in half.modules() if isinstance(m, MXFP4Linear)} == {torch.float16}
    assert logits(half).dtype == torch.float16
    assert (again / "config.json").read_text() == (path / "config.json").read_text()
    config = json.loads((path / "config.json").read_text())
    assert config["quantization_config"]["exclude"] == ["lm_head"] and config["hidden_size"] == 128


def test_quark_bytes_are_the_public_format(saved):
    """Element 2i in the low nibble, e8m0 scales with bias 127: checked against hand-made bytes."""
    path, _, source = saved
    tensors = load_file(str(path / "model.safetensors"))
    w = tensors["model.layers.0.mlp.up_proj.weight"]
    s = tensors["model.layers.0.mlp.up_proj.weight_scale"]
    assert (w.dtype, tuple(w.shape), s.dtype, tuple(s.shape)) == (torch.uint8, (256, 64), torch.uint8, (256, 4))
    layer = source.get_submodule("model.layers.0.mlp.up_proj")
    value = lambda b, i: formats.E2M1_VALUES[(b >> (4 * (i % 2))) & 0xF]  # noqa: E731
    row = [value(int(w[3, i // 2]), i) * 2.0 ** (int(s[3, i // 32]) - 127) for i in range(128)]
    assert mxfp4.dequantize(layer.weight)[3].tolist() == row


def _rewrite(path, dst, edit):
    """A copy of the checkpoint at ``path`` in ``dst`` whose tensors pass through ``edit(dict)``."""
    dst.mkdir()
    tensors = load_file(str(path / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(dst / "model.safetensors"))
    (dst / "config.json").write_text((path / "config.json").read_text())
    return dst


Q = "model.layers.1.self_attn.k_proj"
BAD_TENSORS = {
    "missing": (lambda t: t.pop(f"{Q}.weight_scale"), rf"'{Q}.weight_scale' is missing"),
    "dtype": (lambda t: t.update({f"{Q}.weight": t[f"{Q}.weight"].to(torch.int16)}),
              rf"'{Q}.weight' is I16, must be U8"),
    "shape": (lambda t: t.update({f"{Q}.weight_scale": t[f"{Q}.weight_scale"][:, :3].contiguous()}),
              rf"'{Q}.weight_scale' has shape \[64, 3\], must be \[64, 4\]"),
    "norm_dtype": (lambda t: t.update({"model.norm.weight": t["model.norm.weight"].to(torch.int32)}),
                   r"'model.norm.weight' is I32, must be the model's torch.bfloat16"),
    "norm_missing": (lambda t: t.pop("model.layers.0.input_layernorm.weight"),
                     r"'model.layers.0.input_layernorm.weight' is missing"),
    "unexpected": (lambda t: t.update({"model.extra": torch.zeros(3)}),
                   r"no place for \(strict=True\): \['model.extra'\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_TENSORS))
def test_bad_tensor_is_named_and_model_unchanged(saved, tmp_path, case):
    edit, message = BAD_TENSORS[case]
    bad = _rewrite(saved[0], tmp_path / case, edit)
    model = tiny_llama(1)
    before = snapshot(model)
    with pytest.raises(ValueError, match=message):
        mxfp4.quantize_(model, checkpoint=bad)
    assert_unchanged(model, before)


def test_truncated_file_names_the_tensor(saved, tmp_path):
    bad = _rewrite(saved[0], tmp_path / "cut", lambda t: None)
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[:-5])
    header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
    last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    model = tiny_llama(1)
    before = snapshot(model)
    cut = rf"truncated: tensor '{last}' ends at byte {len(data)}, the file has {len(data) - 5}"
    with pytest.raises(ValueError, match=cut):
        mxfp4.quantize_(model, checkpoint=bad)
    assert_unchanged(model, before)


G = "quantization_config.global_quant_config"
BAD_CONFIGS = {
    "group_size": (("global_quant_config", "weight", "group_size"), 16, rf"{G}.weight.group_size: 16 is not supported"),
    "scale_format": (("global_quant_config", "input_tensors", "scale_format"), "float",
                     rf"{G}.input_tensors.scale_format: 'float' is not supported"),
    "static_input": (("global_quant_config", "input_tensors", "is_dynamic"), False,
                     rf"{G}.input_tensors.is_dynamic: False is not supported"),
    "scale_mode": (("global_quant_config", "input_tensors", "scale_calculation_mode"), "floor",
                   rf"{G}.input_tensors.scale_calculation_mode: 'floor' is not supported"),
    "no_input_quant": (("global_quant_config", "input_tensors"), None, rf"{G}.input_tensors: None is not supported"),
    "fp8_input": (("global_quant_config", "input_tensors", "dtype"), "fp8_e4m3",
                  rf"{G}.input_tensors.dtype: 'fp8_e4m3' is not supported"),
    "output_quant": (("global_quant_config", "output_tensors"), {"dtype": "fp8_e4m3"}, rf"{G}.output_tensors"),
    "method": (("quant_method",), "awq", r"quantization_config.quant_method: 'awq' is not supported"),
    "fake_quantized": (("export", "weight_format"), "fake_quantized",
                       r"quantization_config.export.weight_format: 'fake_quantized' is not supported"),
    "layer_override": (("layer_quant_config",), {"model.layers.0.mlp.up_proj": {"weight": {"group_size": 16}}},
                       r"layer_quant_config\['model.layers.0.mlp.up_proj'\].weight.group_size: 16 is not supported"),
    "layer_unquantized": (("layer_quant_config",), {"*up_proj": {"weight": None, "input_tensors": None}},
                          r"'model.layers.0.mlp.up_proj.weight' is U8, must be the model's torch.bfloat16"),
    "fp8_layer": (("layer_quant_config",), {"*down_proj": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
                                                           "input_tensors": None}},
                  r"layer 'model.layers.0.mlp.down_proj': quantization_config.layer_quant_config\['\*down_proj'\]"
                  r".weight.dtype is FP8; FP8 layers are not supported"),
    "online_rotation": (("algo_config",), [{"name": "rotation", "online_r1_rotation": True}],
                        r"algo_config\[0\]: the 'rotation' algorithm rotates activations at run time"),
    "bad_regex": (("exclude",), ["lm_head", "re:model.(layers"],
                  r"quantization_config.exclude\[1\]: 're:model.\(layers' is not a valid regular expression"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_unsupported_config_names_the_field_and_model_unchanged(saved, tmp_path, case):
    keys, value, message = BAD_CONFIGS[case]
    bad = _rewrite(saved[0], tmp_path / case, lambda t: None)
    config = json.loads((bad / "config.json").read_text())
    node = config["quantization_config"]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    (bad / "config.json").write_text(json.dumps(config))
    model = tiny_llama(1)
    before = snapshot(model)
    with pytest.raises(ValueError, match=message):
        mxfp4.quantize_(model, checkpoint=bad)
    assert_unchanged(model, before)


def test_exclude_matches_as_vllm_and_sglang_do():
    """Exact names, or 're:' with re.match (a prefix match); a glob is a name like any other."""
    qc = {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp4", "group_size": 32,
                                                                      "scale_format": "e8m0"},
                                                           "input_tensors": {"dtype": "fp4", "group_size": 32,
                                                                             "scale_format": "e8m0",
                                                                             "is_dynamic": True}},
          "exclude": ["lm_head", "*.mlp.gate", "re:model\\.layers\\.[01]\\.self_attn"]}
    config = checkpoint.quark_config({"quantization_config": qc})
    names = ("lm_head", "model.lm_head", "model.layers.3.mlp.gate", "*.mlp.gate", "model.layers.1.self_attn.q_proj",
             "model.layers.2.self_attn.q_proj", "model.layers.10.self_attn.q_proj")
    assert [config.excluded(n) for n in names] == [True, False, False, True, True, False, False]
    with pytest.raises(ValueError, match="has no quantization_config"):
        checkpoint.quark_config({})


def test_filter_and_checkpoint_together_refused(saved):
    with pytest.raises(TypeError, match="filter_fn or checkpoint, not both"):
        mxfp4.quantize_(tiny_llama(1), lambda m, n: True, checkpoint=saved[0])


def test_gptoss_experts_load_per_expert(tmp_path):
    e, n, k = 3, 32, 128
    w = torch.randn(e, n, k, generator=torch.Generator().manual_seed(3)).bfloat16()
    q = mxfp4.quantize(w)
    blocks = q.data.reshape(e, n, k // 32, 16)
    blocks[0, 0, 0, 0] = 0x21  # elements 0 and 1 of expert 0, row 0: codes 1 (0.5) and 2 (1.0), low nibble first
    q.scales[0, 0, 0] = 127 + 3
    save_file({"model.layers.0.mlp.experts.down_proj_blocks": blocks.contiguous(),
               "model.layers.0.mlp.experts.down_proj_scales": q.scales.contiguous()},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "mxfp4"}}))
    down = checkpoint.load_gptoss_experts(tmp_path)["model.layers.0.mlp.experts.down_proj"]
    assert down.weights.num_experts == e and down.bias is None
    for i in range(e):
        plain = down.weights.plain(i)
        assert torch.equal(plain.data, q.data[i]) and torch.equal(plain.scales, q.scales[i])
    assert mxfp4.dequantize(down.weights.expert(0))[0, :2].tolist() == [0.5 * 8, 1.0 * 8]

    save_file({"x_blocks": blocks.contiguous(), "x_scales": q.scales[:, :, :3].contiguous()},
              str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"'x_scales' has shape \[3, 32, 3\], must be \[3, 32, 4\]"):
        checkpoint.load_gptoss_experts(tmp_path)


def _header_file(path, header, data=b""):
    """A safetensors file whose header is ``header`` (a JSON-able value, or raw bytes) followed by ``data``."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.mkdir(exist_ok=True)
    (path / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


MALFORMED = {
    "bad_json": (b"{not json", r"model.safetensors: the safetensors header is not valid JSON"),
    "not_a_dict": ([1, 2], r"model.safetensors: the safetensors header must be a JSON object, got list"),
    "entry_not_a_dict": ({"w": 3}, r"tensor 'w': header entry must be an object with dtype, shape and data_offsets"),
    "negative_offset": ({"w": {"dtype": "U8", "shape": [4], "data_offsets": [-4, 0]}},
                        r"tensor 'w': data_offsets \[-4, 0\] must be \[start, end\] with 0 <= start <= end"),
    "overlap": ({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                 "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}},
                r"data_offsets of tensors 'a' and 'b' overlap \(bytes 2 to 4 of the data\)"),
    "bad_shape": ({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}},
                  r"tensor 'w': shape \[-1\] must be a list of non-negative integers"),
    "bad_dtype": ({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}},
                  r"tensor 'w': dtype 'Q4' is not a safetensors dtype"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_safetensors_names_the_file_and_field(tmp_path, case):
    header, message = MALFORMED[case]
    path = _header_file(tmp_path / case, header, bytes(8))
    with pytest.raises(ValueError, match=message):
        mxfp4.load(path)


def test_malformed_index_and_config_name_the_file(tmp_path):
    path = _header_file(tmp_path / "index", {"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, bytes(4))
    (path / "model.safetensors.index.json").write_text('{"metadata": {}}')
    with pytest.raises(ValueError, match=r"model.safetensors.index.json: 'weight_map' is missing"):
        mxfp4.load(path)
    both = '"w": "model.safetensors", "v": "model.safetensors"'
    (path / "model.safetensors.index.json").write_text('{"weight_map": {' + both + '}')
    with pytest.raises(ValueError, match=r"model.safetensors.index.json: the index is not valid JSON"):
        mxfp4.load(path)
    (path / "model.safetensors.index.json").write_text('{"weight_map": {' + both + '}}')
    with pytest.raises(ValueError, match=r"weight_map puts tensor 'v' in model.safetensors, whose header lacks it"):
        mxfp4.load(path)
    (path / "model.safetensors.index.json").write_text('{"weight_map": {"w": "../model.safetensors"}}')
    with pytest.raises(ValueError, match=r"weight_map\['w'\] = '../model.safetensors' must be a file name"):
        mxfp4.load(path)
    (path / "model.safetensors.index.json").unlink()
    (path / "config.json").write_text("{")
    with pytest.raises(ValueError, match=r"config.json: the model config is not valid JSON"):
        mxfp4.load(path)


def test_shard_sizes(saved, tmp_path):
    from mxfp4.checkpoint.safetensors import parse_size

    assert [parse_size(s) for s in ("5GB", "500MiB", "1.5KB", 123)] == [5 * 10**9, 500 * 2**20, 1500, 123]
    for bad in ("5XB", 0, -1, "GB", None, True):
        with pytest.raises(ValueError, match="max_shard_size must be a positive number of bytes"):
            parse_size(bad)
    model = saved[2]
    out = mxfp4.save(model, tmp_path / "shards", max_shard_size=50_000)
    files = sorted(out.glob("model-*.safetensors"))
    assert len(files) > 2 and not (out / "model.safetensors").exists()
    assert all(f.stat().st_size < 50_000 + 64 * 2**10 for f in files)  # a shard's data, plus its header
    assert torch.equal(logits(mxfp4.quantize_(tiny_llama(1), checkpoint=out)), saved[1])
    one = mxfp4.save(model, out)  # a later save into the same directory leaves no stale shard behind
    assert sorted(p.name for p in one.glob("*.safetensors")) == ["model.safetensors"]
    assert not (one / "model.safetensors.index.json").exists()


# ---- every field of every JSON file of a checkpoint, of every JSON type ------------------------------

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


def test_readme_recipe_round_trip_is_exact_and_why_it_builds_with_dtype(tmp_path):
    """The README builds the model with dtype=torch.bfloat16: saved and loaded on meta it gives the same logits
    over 64 positions (the rotary inv_freq stays float32, as transformers builds it and as the load rebuilds it).
    Cast with .to(torch.bfloat16) instead, inv_freq is rounded to bf16, which no checkpoint can say."""
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False)
    ids = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(7))
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    assert model.model.rotary_emb.inv_freq.dtype == torch.float32
    mxfp4.quantize_(model)
    with torch.no_grad():
        want = model(ids).logits
    path = mxfp4.save(model, tmp_path / "ckpt")
    with torch.device("meta"):
        loaded = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(path),
                                                               dtype=torch.bfloat16)
    mxfp4.quantize_(loaded, checkpoint=path)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(ids).logits, want)
    cast = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    assert cast.model.rotary_emb.inv_freq.dtype == torch.bfloat16  # the reason the README does not cast


def test_a_layer_under_two_names_saves_once_and_loads_under_both(tmp_path):
    def shared():
        m = torch.nn.Module()
        m.a = torch.nn.Linear(64, 32)
        m.b = m.a
        m.inner = torch.nn.Sequential(m.a)
        return m.bfloat16()

    torch.manual_seed(0)
    model = mxfp4.quantize_(shared())
    path = mxfp4.save(model, tmp_path / "shared")
    assert sorted(checkpoint.load(path).tensors) == ["a.bias", "a.weight", "a.weight_scale"]
    loaded = mxfp4.quantize_(shared(), checkpoint=path)
    assert isinstance(loaded.a, MXFP4Linear) and loaded.b is loaded.a and loaded.inner[0] is loaded.a
    x = torch.randn(3, 64).bfloat16()
    assert torch.equal(loaded.b(x), model.b(x))
