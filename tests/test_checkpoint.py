"""Checkpoints end to end on the CPU: a tiny Llama quantized, saved in Quark's format, loaded into a
fresh model bit for bit; the format's bytes, shards, GPT-OSS experts, the README's recipe, a layer under two
names. Bad checkpoints and configs: test_checkpoint_refused.py; every JSON field: test_checkpoint_json.py."""
import json

import pytest
import torch

import mxfp4
from mxfp4 import checkpoint, formats
from mxfp4.nn import MXFP4Linear

from .checkpoints import logits, tiny_llama

transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402  (installed with transformers)


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
