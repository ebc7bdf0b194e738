"""Bad checkpoints and configs refused on the CPU, each message naming the tensor, file or field, and the
model left as it was: tensors missing or of the wrong dtype or shape, a truncated file, unsupported
quantization_config fields, malformed safetensors headers and index files; the exclude rules."""
import json

import pytest
import torch

import mxfp4
from mxfp4 import checkpoint

from .checkpoints import assert_unchanged, snapshot, tiny_llama

from safetensors.torch import load_file, save_file  # noqa: E402  (installed with transformers)


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
