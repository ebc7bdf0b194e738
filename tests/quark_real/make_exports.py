"""Regenerates the exports in this folder with AMD Quark's own LLM flow (needs ``pip install amd-quark``).

    python tests/quark_real/make_exports.py        # rewrites tests/quark_real/<name>/ (80-100 KB each)

Each export is a tiny random model (hidden 64, 2 layers, vocabulary 128) quantized to W4A4 MXFP4 by
``LLMTemplate.get(arch).get_config(scheme="mxfp4", ...)`` and ``ModelQuantizer(cfg).quantize_model``,
written by ``export_safetensors`` into ``<name>/``, and ``<name>.logits.safetensors``: the fixed
``input_ids`` and the logits of Quark's emulated forward of the quantized model (bf16, on the CPU).

On the CPU Quark's dynamic MXFP4 quantizer of bf16 / fp16 activations calls a HIP kernel that has no CPU
build (``qdq_mxfp4 is only implemented in CUDA devices``); for float32 it takes its generic fake
quantizer (the observer's e8m0 scale, e2m1 rounding), the same rule. Here every activation goes through
that generic path in float32 and back (bf16 -> float32 -> bf16 is exact for bf16 inputs and for their
quantized values). In the FP8 KV-cache export the k_proj / v_proj output quantizers (the FP8 KV cache)
are switched off for the logits: mxfp4 keeps a bf16 KV cache.
"""
from __future__ import annotations

import pathlib
import shutil

import torch
import transformers
from safetensors.torch import save_file

HERE = pathlib.Path(__file__).parent
VOCAB = 128
INPUT_IDS = torch.arange(2 * 24).reshape(2, 24) * 37 % VOCAB  # fixed, the tests read them from the file


def _generic_activation_quantizer() -> None:
    """Quark's dynamic MXFP4 activation quantizer through its generic path for every dtype (see above)."""
    import quark.torch.kernel as kernel

    def forward(ctx, x, fake_quantizer, scale_calculation_mode):
        return fake_quantizer.fake_quantize(x.float()).to(x.dtype)

    kernel.MXFP4DynamicFakeQuantizeFunction.forward = staticmethod(forward)


def _config(arch: str) -> transformers.PretrainedConfig:
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                  tie_word_embeddings=False)
    if arch == "llama":
        return transformers.LlamaConfig(**common)
    return transformers.Qwen2Config(**common)  # q / k / v projections with biases


EXPORTS = {
    # name: (arch, get_config keyword arguments)
    "llama": ("llama", {}),
    "qwen2": ("qwen2", {}),
    "llama_fp8kv": ("llama", {"kv_cache_scheme": "fp8"}),
    "llama_exclude": ("llama", {"exclude_layers": ["lm_head", "model.layers.0.mlp.down_proj", "*o_proj"]}),
}


def make(name: str, arch: str, options: dict) -> pathlib.Path:
    from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

    torch.manual_seed(sorted(EXPORTS).index(name))
    # built in bf16 (the rotary frequencies stay float32, as a checkpoint-loaded model computes them)
    model = transformers.AutoModelForCausalLM.from_config(_config(arch), dtype=torch.bfloat16).eval()
    if arch == "qwen2":  # transformers initializes biases to zero: give them values
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.Linear) and m.bias is not None:
                    m.bias.normal_(0, 0.05)
    cfg = LLMTemplate.get(arch).get_config(scheme="mxfp4", **options)
    calib = [torch.randint(0, VOCAB, (1, 32), generator=torch.Generator().manual_seed(i)) for i in range(4)]
    model = ModelQuantizer(cfg).quantize_model(model, calib)
    if "kv_cache_scheme" in options:
        for n, m in model.named_modules():
            if n.endswith(("k_proj", "v_proj")) and getattr(m, "_output_quantizer", None) is not None:
                m._output_quantizer.disable_fake_quant()
    with torch.no_grad():
        logits = model(INPUT_IDS).logits
    path = HERE / name
    shutil.rmtree(path, ignore_errors=True)
    export_safetensors(model, path)
    (path / "generation_config.json").unlink(missing_ok=True)
    save_file({"input_ids": INPUT_IDS.contiguous(), "logits": logits.contiguous()}, HERE / f"{name}.logits.safetensors")
    return path


def main() -> None:
    _generic_activation_quantizer()
    for name, (arch, options) in EXPORTS.items():
        path = make(name, arch, options)
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"{path}: {size} bytes")


if __name__ == "__main__":
    main()
