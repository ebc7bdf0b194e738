"""Checkpoints made by AMD Quark 0.13 itself (tests/quark_real/make_exports.py: its LLM flow, ModelQuantizer and
export_safetensors, on tiny random Llama and Qwen2 models) load into models built on the meta device, and their
logits equal Quark's own emulated W4A4 forward bit for bit (``<name>.logits.safetensors``, written by the same
script). The FP8 KV-cache export is compared with Quark's k_proj / v_proj output quantizers off: this library
keeps the KV cache in the model's dtype. The export with excluded layers runs those layers as bf16 nn.Linear,
whose CPU GEMM rounds by the processor's instruction set (AVX2 machines differ from the one the logits were
written on in about 1% of the logits, by at most 0.001 where they reach 0.64): there 95% must be equal and the
rest within one bf16 unit of the largest logit, and which layers are excluded is checked by their types
(test_quark_export_layers_are_the_configs)."""
import json
import pathlib

import pytest
import torch

import mxfp4
from mxfp4.nn import MXFP4Linear

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

HERE = pathlib.Path(__file__).parent / "quark_real"
EXPORTS = ("llama", "qwen2", "llama_fp8kv", "llama_exclude")


def _load(name: str):
    path = HERE / name
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(path),
                                                              dtype=torch.bfloat16)
    return mxfp4.quantize_(model, checkpoint=path, device="cpu").eval()


@pytest.mark.parametrize("name", EXPORTS)
def test_quark_export_logits_are_quarks(name):
    model = _load(name)
    want = safetensors_torch.load_file(HERE / f"{name}.logits.safetensors")
    with torch.no_grad():
        got = model(want["input_ids"]).logits
    assert got.dtype is torch.bfloat16
    if name != "llama_exclude":
        assert torch.equal(got, want["logits"])
        return
    # one bf16 unit of the largest logit (a layer quantized that should not be moves them by ~1e-1)
    diff = (got.float() - want["logits"].float()).abs()
    assert diff.max() <= 2.0 ** -8 * want["logits"].float().abs().max() and (diff == 0).float().mean() >= 0.95


def test_quark_export_layers_are_the_configs():
    config = json.loads((HERE / "llama_exclude" / "config.json").read_text())["quantization_config"]
    model = _load("llama_exclude")
    for name, m in model.named_modules():
        if name.endswith(("_proj", "lm_head")):
            excluded = name in config["exclude"]
            assert isinstance(m, torch.nn.Linear if excluded else MXFP4Linear), name
    assert sum(isinstance(m, MXFP4Linear) for m in model.modules()) == 11  # 14 projections, 3 excluded
    qwen = _load("qwen2")
    assert all(qwen.get_submodule(f"model.layers.1.self_attn.{p}_proj").bias is not None for p in "qkv")
    kv = _load("llama_fp8kv").model.layers[0].self_attn
    assert kv.k_scale.dtype is torch.float32 and kv.k_scale.item() > 0
