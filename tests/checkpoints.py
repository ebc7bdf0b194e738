"""What the checkpoint tests share: a tiny Llama with random weights, its logits, and a model's snapshot (to
check that a refused load left it as it was). The ``saved`` fixture (a checkpoint of the tiny Llama) is in
conftest.py."""
import pytest
import torch

transformers = pytest.importorskip("transformers")


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
