"""Published Quark MXFP4 exports into models built on the meta device: a tiny Llama and a tiny Qwen2
(biases, tied embeddings), checkpoints written in AMD's layout by tests/quark_export.py (not by
mxfp4.save): 2 shards, an index, FP8 KV-cache scales, float32 norms. The loaded logits must equal,
bit for bit, those of the same bf16 weights quantized in memory (a wrong rotary inv_freq changes them)."""
import copy
import logging
import re

import pytest
import torch

import mxfp4
from mxfp4.nn import MXFP4Linear

from . import quark_export

transformers = pytest.importorskip("transformers")


def tiny(kind: str, seed: int = 0, device: str = "cpu"):
    if kind == "llama":
        cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                       rope_theta=500000.0, tie_word_embeddings=False)
        cls = transformers.LlamaForCausalLM
    else:
        cfg = transformers.Qwen2Config(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                       tie_word_embeddings=True)
        cls = transformers.Qwen2ForCausalLM
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(cfg)
    return model.to(torch.bfloat16).eval()


def logits(model) -> torch.Tensor:
    ids = torch.randint(0, 256, (2, 11), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        return model(ids).logits


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def published(request, tmp_path_factory):
    """(kind, checkpoint directory, logits of the bf16 model quantized in memory)."""
    source = tiny(request.param)
    path = quark_export.export(source, tmp_path_factory.mktemp(request.param))
    return request.param, path, logits(mxfp4.quantize_(source))


def test_meta_model_loads_bit_identical_to_in_memory_quantization(published):
    kind, path, want = published
    model = tiny(kind, device="meta")
    mxfp4.quantize_(model, checkpoint=path, device="cpu")
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    assert sum(isinstance(m, MXFP4Linear) for m in model.modules()) == 2 * 7
    assert torch.equal(logits(model), want)
    if kind == "qwen2":  # tied: one tensor for both names, and the q/k/v biases loaded
        assert model.lm_head.weight is model.model.embed_tokens.weight
        assert model.model.layers[0].self_attn.q_proj.bias is not None
    attn = model.model.layers[1].self_attn
    assert attn.k_scale.item() == pytest.approx(quark_export.kv_scale("model.layers.1.self_attn.k_proj"))
    assert attn.v_scale.item() == pytest.approx(quark_export.kv_scale("model.layers.1.self_attn.v_proj"))


def test_wrong_rotary_frequencies_would_be_caught(published):
    """The check above can fail: inv_freq off by 1% (to_empty() would leave garbage) changes the logits."""
    kind, path, want = published
    model = tiny(kind, device="meta")
    mxfp4.quantize_(model, checkpoint=path, device="cpu")
    model.model.rotary_emb.inv_freq.mul_(1.01)
    assert not torch.equal(logits(model), want)


def test_kv_note_is_logged_once(published, caplog):
    _, path, _ = published
    with caplog.at_level(logging.INFO, logger="mxfp4"):
        mxfp4.quantize_(tiny(published[0], device="meta"), checkpoint=path)
    notes = [r.message for r in caplog.records if "KV-cache" in r.message]
    assert len(notes) == 1 and "k_scale" in notes[0] and "['*k_proj', '*v_proj']" in notes[0]


def test_mtp_layers_reported_under_strict_false(tmp_path, caplog):
    """DeepSeek-R1 exports hold an MTP layer (model.layers.61.*) a 61-layer model has no place for."""
    source = tiny("llama")
    extra = {"model.layers.2.eh_proj.weight": torch.zeros(16, 32, dtype=torch.bfloat16),
             "model.layers.2.enorm.weight": torch.ones(128, dtype=torch.bfloat16)}
    path = quark_export.export(source, tmp_path / "mtp", extra=extra)
    with pytest.raises(ValueError, match=r"no place for \(strict=True\): \['model.layers.2.eh_proj.weight', "):
        mxfp4.quantize_(tiny("llama", device="meta"), checkpoint=path)
    with caplog.at_level(logging.WARNING, logger="mxfp4"):
        model = mxfp4.quantize_(tiny("llama", device="meta"), checkpoint=path, strict=False)
    assert torch.equal(logits(model), logits(mxfp4.quantize_(source)))
    assert any("2 tensors the model has no place for" in r.message and "model.layers.2" in r.message
               for r in caplog.records)


def test_excluded_and_unquantized_layers_load_as_the_models_own(tmp_path):
    """Attention left in bf16 through an exclude regex (as some DeepSeek exports do) and an MLP projection
    left unquantized by a layer_quant_config entry: both read as stored, float32 cast to bf16."""
    source = tiny("llama")
    qc = quark_export.PUBLISHED | {"exclude": ["lm_head", r"re:model\.layers\.\d+\.self_attn\."],
                                   "layer_quant_config": {"*down_proj": {"weight": None, "input_tensors": None}},
                                   "export": {**quark_export.PUBLISHED["export"], "kv_cache_group": []}}
    keep = {n for n, m in source.named_modules() if isinstance(m, torch.nn.Linear)
            and (".self_attn." in n or n.endswith("down_proj") or n == "lm_head")}
    state = {k: (v.float() if k.rpartition(".")[0] in keep else v) for k, v in source.state_dict().items()}
    tensors = {}
    for key, t in state.items():
        owner, _, attr = key.rpartition(".")
        if attr == "weight" and owner not in keep and isinstance(source.get_submodule(owner), torch.nn.Linear):
            w = mxfp4.quantize(t)
            tensors[key], tensors[f"{owner}.weight_scale"] = w.data, w.scales
        else:
            tensors[key] = t
    quark_export.write_checkpoint(tmp_path / "mixed", tensors, {**source.config.to_dict(),
                                                               "quantization_config": qc}, shards=3)
    model = mxfp4.quantize_(tiny("llama", device="meta"), checkpoint=tmp_path / "mixed")
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear
    assert type(model.model.layers[0].mlp.down_proj) is torch.nn.Linear
    assert type(model.model.layers[0].mlp.up_proj) is MXFP4Linear
    want = mxfp4.quantize_(source, lambda m, n: n not in keep)
    assert torch.equal(logits(model), logits(want))


def test_loaded_model_saves_back_with_the_kv_scales(published, tmp_path):
    kind, path, want = published
    model = mxfp4.quantize_(tiny(kind, device="meta"), checkpoint=path)
    out = mxfp4.save(model, tmp_path / "again", max_shard_size=40_000)
    assert len(list(out.glob("model-*-of-*.safetensors"))) > 2 and (out / "model.safetensors.index.json").exists()
    ckpt = mxfp4.load(out)
    assert ckpt.config["quantization_config"]["export"]["kv_cache_group"] == ["*k_proj", "*v_proj"]
    name = "model.layers.0.self_attn.k_proj.output_scale"
    assert ckpt.tensor(name).item() == mxfp4.load(path).tensor(name).item()
    again = mxfp4.quantize_(tiny(kind, device="meta"), checkpoint=out)
    assert torch.equal(logits(again), want)


def _published(**changes):
    qc = copy.deepcopy(quark_export.PUBLISHED)
    for path, value in changes.items():
        node, keys = qc, path.split("/")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return {"quantization_config": qc}


def test_published_config_and_its_newer_fields_are_accepted():
    config = mxfp4.checkpoint.quark_config(_published(**{"global_quant_config/weight/block_size": 32,
                                                         "kv_cache_post_rope": False}))
    assert config.kv_cache_group == ("*k_proj", "*v_proj") and config.kv_cache["dtype"] == "fp8_e4m3"
    k = config.rule("model.layers.7.self_attn.k_proj")
    assert k.kind is mxfp4.checkpoint.LayerKind.MXFP4 and k.kv_output
    assert not config.rule("model.layers.7.self_attn.q_proj").kv_output


def test_quark_013_fields_are_metadata_and_unknown_fields_one_note(caplog):
    """Quark 0.13 writes zero_point_type and max_input_numel in every spec and each kv_cache_quant_config entry
    as a whole layer config: accepted; fields never seen are accepted with one logged note naming each."""
    kv_layer = {**quark_export._LAYER, "output_tensors": {**quark_export._FP8_KV, "zero_point_type": "int32"}}
    changes = {f"global_quant_config/{t}/{f}": v for t in ("weight", "input_tensors")
               for f, v in (("zero_point_type", "int32"), ("max_input_numel", 4194304))}
    with caplog.at_level(logging.INFO, logger="mxfp4"):
        mxfp4.checkpoint.quark_config(_published(**changes, kv_cache_quant_config={
            "*k_proj": kv_layer, "*v_proj": quark_export._FP8_KV}))
        assert not caplog.records
        config = mxfp4.checkpoint.quark_config(_published(**{
            "quant_flow": "standard", "global_quant_config/weight/new_observer_knob": 3,
            "export/new_export_field": None, "layer_quant_config/*k_proj/new_layer_field": "x"}))
    assert config.rule("model.layers.0.mlp.up_proj").kind is mxfp4.checkpoint.LayerKind.MXFP4
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1
    for field in ("quantization_config.quant_flow = 'standard'", "global_quant_config.weight.new_observer_knob = 3",
                  "quantization_config.export.new_export_field = None",
                  "layer_quant_config['*k_proj'].new_layer_field = 'x'"):
        assert field in notes[0]


KV = "quantization_config.layer_quant_config['*k_proj']"
BAD_PUBLISHED = {
    "kv_int8": ({"layer_quant_config/*k_proj/output_tensors/dtype": "int8"},
                rf"{re.escape(KV)}.output_tensors.dtype: 'int8' is not supported \(must be 'fp8_e4m3'\)"),
    "kv_differ": ({"layer_quant_config/*v_proj/output_tensors": {**quark_export.PUBLISHED["layer_quant_config"]
                                                                  ["*v_proj"]["output_tensors"], "symmetric": False}},
                  r"the entries \['\*k_proj', '\*v_proj'\] of kv_cache_group have different output_tensors"),
    "kv_group_names_nothing": ({"export/kv_cache_group": ["*k_proj", "*kv_a_proj"]},
                               r"export.kv_cache_group: '\*kv_a_proj' names no layer_quant_config entry"),
    "output_outside_kv": ({"export/kv_cache_group": ["*k_proj"]},
                          r"\['\*v_proj'\].output_tensors: .* is not supported \(must be null, or the FP8 KV-cache"),
    "merge_groups": ({"export/weight_merge_groups": [["*q_proj", "*k_proj"]]},
                     r"export.weight_merge_groups: .* is not supported"),
    "online_rotation_old_field": ({"pre_quant_opt_config": [{"name": "rotation", "online_r1_rotation": True}]},
                                  r"quantization_config.pre_quant_opt_config\[0\]: the 'rotation' algorithm rotates "
                                  r"activations at run time \(online_r1_rotation\)"),
    "shared_scales": ({"shared_scale_groups": [["*q_proj", "*k_proj"]]},
                      r"quantization_config.shared_scale_groups: .* is not supported \(must be empty"),
    "kv_layer_config_int8": ({"kv_cache_quant_config": {"*k_proj": {**quark_export._LAYER, "output_tensors": {
        **quark_export._FP8_KV, "dtype": "int8"}}}},
        r"kv_cache_quant_config\['\*k_proj'\].output_tensors.dtype: 'int8' is not supported \(must be 'fp8_e4m3'\)"),
    "kv_spec_per_channel": ({"kv_cache_quant_config": {"*v_proj": {**quark_export._FP8_KV, "qscheme": "per_channel"}}},
                            r"kv_cache_quant_config\['\*v_proj'\].qscheme: 'per_channel' is not supported"),
    "group_64_beside_metadata": ({"global_quant_config/weight/group_size": 64,
                                  "global_quant_config/weight/zero_point_type": "int32"},
                                 r"\.weight.group_size: 64 is not supported \(must be 32\)"),
    "static_inputs": ({"global_quant_config/input_tensors/is_dynamic": False},
                      r"\.input_tensors.is_dynamic: False is not supported \(must be True\)"),
    "w4a8": ({"global_quant_config/input_tensors/dtype": "fp8_e4m3"},
             r"input_tensors.dtype: 'fp8_e4m3' is not supported \(must be 'fp4'\)"),
}


@pytest.mark.parametrize("case", sorted(BAD_PUBLISHED))
def test_published_config_variants_refused_by_field(case):
    changes, message = BAD_PUBLISHED[case]
    with pytest.raises(ValueError, match=message):
        mxfp4.checkpoint.quark_config(_published(**changes))
