"""Mixture of experts on the CPU: the MXFP4 experts module against each transformers MoE class's own
forward with W4A4 products, the gate/up interleave, the per-expert layout's swap, and tiny MoE models
saved and loaded on meta (Quark per-expert and GPT-OSS checkpoints)."""
import pytest
import torch

import mxfp4
from mxfp4 import moe, reference

transformers = pytest.importorskip("transformers")

# ---- the experts module against the model's own forward -------------------------------------------


class W4A4(torch.overrides.TorchFunctionMode):
    """Every product with a weight in the module's own forward (F.linear, x @ W, torch.bmm) as the exact
    W4A4 reference: activations quantized per 1x32 block, the weight's values quantized (the tests set
    weights to MXFP4 values first, so that changes nothing), the product rounded once to bf16."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.linear:
            x, w, b = args[0], args[1], args[2] if len(args) > 2 else kwargs.get("bias")
            y = reference.gemm_a4w4(x, mxfp4.quantize(w))
            return y if b is None else y + b
        if func in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__):
            x, w = args
            return reference.gemm_a4w4(x, mxfp4.quantize(w.t()))
        if func is torch.bmm:
            p, q = args
            if q.shape[-1] == 1:  # W [S, N, K] @ x [S, K, 1]
                rows = [reference.gemm_a4w4(q[s, :, 0], mxfp4.quantize(p[s])) for s in range(len(p))]
                return torch.stack(rows)[..., None]
            return torch.stack([reference.gemm_a4w4(p[s], mxfp4.quantize(q[s].t())) for s in range(len(p))])
        return func(*args, **kwargs)


def to_mxfp4_values(w: torch.Tensor, k_dim: int) -> torch.Tensor:
    """``w`` with every 32-element block along ``k_dim`` replaced by its MXFP4 values (in w's dtype)."""
    moved = w.detach().transpose(k_dim, -1)
    return mxfp4.dequantize(mxfp4.quantize(moved.contiguous())).to(w.dtype).transpose(k_dim, -1)


def experts_module(kind: str):
    """A transformers v5 experts module (random bf16 weights, MXFP4 values) of the kind's tiny config."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Experts
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts
    from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeExperts
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    cls, cfg = {
        "deepseek_v3": (DeepseekV3Experts, transformers.DeepseekV3Config(hidden_size=64, moe_intermediate_size=32,
                                                                        n_routed_experts=6)),
        "qwen2_moe": (Qwen2MoeExperts, transformers.Qwen2MoeConfig(hidden_size=64, moe_intermediate_size=64,
                                                                    num_experts=6)),
        "qwen3_moe": (Qwen3MoeExperts, transformers.Qwen3MoeConfig(hidden_size=96, moe_intermediate_size=32,
                                                                    num_experts=6)),
        "gpt_oss": (GptOssExperts, transformers.GptOssConfig(hidden_size=64, intermediate_size=32,
                                                              num_local_experts=6)),
    }[kind]
    torch.manual_seed(0)
    m = cls(cfg).to(torch.bfloat16)
    transposed = kind == "gpt_oss"
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 3:  # K is H for gate_up and I for down: dim 2, or dim 1 when stored [E, K, N]
                p.copy_(to_mxfp4_values(torch.randn_like(p) * 0.5, 1 if transposed else 2))
            else:
                p.copy_(torch.randn_like(p))
    return m


def routing(t: int, e: int, k: int, dtype: torch.dtype, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    index = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)])
    weights = torch.rand(t, k, generator=g).to(dtype)
    return index, weights


@pytest.mark.parametrize("implementation", ["eager", "batched_mm"])
@pytest.mark.parametrize("kind", ["deepseek_v3", "qwen2_moe", "qwen3_moe", "gpt_oss"])
def test_experts_match_the_models_forward_with_w4a4_products(kind, implementation):
    """Bit for bit: the class's own forward (eager: index_add_ per expert; batched_mm: summed, as transformers'
    default grouped_mm), each product replaced by the exact W4A4 product, against MXFP4Experts."""
    m = experts_module(kind)
    m.config._experts_implementation = implementation
    ours = moe.from_module(m)
    assert ours.accumulation is (moe.Accumulation.EAGER if implementation == "eager" else moe.Accumulation.SUM)
    hidden = torch.randn(9, m.gate_up_proj.shape[1 if kind == "gpt_oss" else 2]).bfloat16()
    # DeepSeek's router gives float32 weights, the others the hidden dtype; expert 5 gets no token, one gets 1
    index, weights = routing(9, 5, 2, torch.float32 if kind == "deepseek_v3" else torch.bfloat16)
    index[0, 0] = 4 if (index == 4).sum() != 1 else index[0, 0]
    with torch.no_grad():
        with W4A4():
            want = m(hidden, index, weights)
        got = ours(hidden, index, weights)
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)
    assert ours.kept_bytes() == sum(b.numel() for b in ours.buffers())


def test_gpt_oss_gate_is_the_even_rows_of_gate_up():
    """GPT-OSS interleaves gate (row 2j) and up (row 2j + 1): with the gate rows and biases zero,
    (u + 1) * 0 * sigmoid(0) is 0, so every expert's output is its down bias alone; with the up rows zero
    instead it is not."""
    hidden, (index, _) = torch.randn(4, 64).bfloat16(), routing(4, 6, 1, torch.bfloat16)
    for zero, want_bias_only in ((0, True), (1, False)):
        m = experts_module("gpt_oss")
        with torch.no_grad():
            m.gate_up_proj[:, :, zero::2] = 0  # [E, H, 2I]: output column 2j + zero
            m.gate_up_proj_bias[:, zero::2] = 0
            out = moe.from_module(m)(hidden, index, torch.ones(4, 1, dtype=torch.bfloat16))
        assert torch.equal(out, m.down_proj_bias[index[:, 0]]) is want_bias_only


class MLP(torch.nn.Module):
    """A per-expert MLP as transformers v4 held experts (and as Quark's per-expert checkpoints name them)."""

    def __init__(self, hidden: int, inter: int, bias: bool = False):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, inter, bias=bias)
        self.up_proj = torch.nn.Linear(hidden, inter, bias=bias)
        self.down_proj = torch.nn.Linear(inter, hidden, bias=bias)
        self.act_fn = torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class PerExpertBlock(torch.nn.Module):
    """A v4-style sparse MoE block: ``experts[e](tokens)`` per expert hit, weighted, index_add_ in expert order."""

    def __init__(self, e: int = 5, hidden: int = 64, inter: int = 96, bias: bool = False):
        super().__init__()
        self.experts = torch.nn.ModuleList(MLP(hidden, inter, bias) for _ in range(e))

    def forward(self, hidden, index, weights):
        out = torch.zeros_like(hidden)
        for e in range(len(self.experts)):
            token, slot = torch.where(index == e)
            if token.numel():
                out.index_add_(0, token, (self.experts[e](hidden[token]) * weights[token, slot, None]).to(out.dtype))
        return out


@pytest.mark.parametrize("bias", [False, True])
def test_per_expert_layout_swaps_to_one_stacked_module(bias):
    import copy

    torch.manual_seed(0)
    block = PerExpertBlock(bias=bias).to(torch.bfloat16)
    linears = mxfp4.quantize_(copy.deepcopy(block), lambda m, n: isinstance(m, torch.nn.Linear))
    assert isinstance(linears.experts[0].gate_proj, mxfp4.nn.MXFP4Linear)
    mxfp4.quantize_(block)
    assert isinstance(block.experts, mxfp4.nn.MXFP4Experts) and len(block.experts) == 5
    assert not any(isinstance(m, (torch.nn.Linear, mxfp4.nn.MXFP4Linear)) for m in block.modules())
    hidden, (index, weights) = torch.randn(7, 64).bfloat16(), routing(7, 4, 2, torch.bfloat16)
    with torch.no_grad():
        want = linears(hidden, index, weights)
        assert torch.equal(block(hidden, index, weights), want)  # experts[e](x), one expert at a time
        assert torch.equal(block.experts(hidden, index, weights), want)  # the fused call, grouped
    with pytest.raises(IndexError, match="expert 5 out of range for 5 experts"):
        block.experts[5]


def test_experts_module_checks_its_inputs():
    ours = moe.from_module(experts_module("qwen3_moe"))
    hidden, (index, weights) = torch.randn(3, 96).bfloat16(), routing(3, 6, 2, torch.bfloat16)
    with pytest.raises(ValueError, match=r"hidden_states must be \[T, 96\] and top_k_index \[T, k\]"):
        ours(hidden[:, :64], index, weights)
    with pytest.raises(ValueError, match=r"top_k_weights must have top_k_index's shape \(3, 2\)"):
        ours(hidden, index, weights[:, :1])
    with pytest.raises(ValueError, match=r"top_k_index must hold experts in \[0, 6\), got 6"):
        ours(hidden, torch.full_like(index, 6), weights)
    bad = index.clone()
    bad[0] = torch.tensor([-1, 5])
    with pytest.raises(ValueError, match=r"top_k_index must hold experts in \[0, 6\), got -1\.\.5"):
        ours(hidden, bad, weights)


def test_experts_module_asserts_the_range_where_it_cannot_read(monkeypatch):
    """Under torch.compile (and CUDA graph capture) the range check reads nothing: the device asserts (on the
    CPU the assert raises at once), so an index out of range never routes a pair silently."""
    ours = moe.from_module(experts_module("qwen3_moe"))
    hidden, (index, weights) = torch.randn(3, 96).bfloat16(), routing(3, 6, 2, torch.bfloat16)
    want = ours(hidden, index, weights)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    for bad in (6, -1):
        with pytest.raises(RuntimeError, match=r"top_k_index must hold experts in \[0, 6\)"):
            ours(hidden, torch.full_like(index, bad), weights)
    assert torch.equal(ours(hidden, index, weights), want)  # indices in range pass the assert
    with pytest.raises(TypeError, match="is not an experts module mxfp4 swaps"):
        moe.from_module(torch.nn.Linear(64, 64))


# ---- tiny MoE models: quantize_, save, load on meta ------------------------------------------------

def tiny(kind: str, device: str = "cpu"):
    """A 2-layer model of the kind (random weights, bf16): DeepSeek-V3 (a dense first layer, then 8 routed
    experts and a shared one, MLA attention) or GPT-OSS (4 experts with biases, attention sinks)."""
    if kind == "deepseek_v3":
        cfg = transformers.DeepseekV3Config(
            vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1,
            num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1, kv_lora_rank=32,
            q_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16, max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
        cls = transformers.DeepseekV3ForCausalLM
    else:
        cfg = transformers.GptOssConfig(vocab_size=256, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
                                        sliding_window=8)
        cls = transformers.GptOssForCausalLM
    torch.manual_seed(0)
    with torch.device(device):
        model = cls(cfg)
    if device == "cpu":  # larger router weights than the init's, so tokens spread over the experts
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "router" in name or name.endswith("mlp.gate.weight"):
                    p.normal_(0, 1)
    return model.to(torch.bfloat16).eval()


def logits(model) -> torch.Tensor:
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        return model(ids).logits


@pytest.mark.parametrize("kind", ["deepseek_v3", "gpt_oss"])
def test_tiny_moe_model_saves_and_loads_on_meta_bit_identical(kind, tmp_path):
    source = mxfp4.quantize_(tiny(kind))
    experts = [m for m in source.modules() if isinstance(m, mxfp4.nn.MXFP4Experts)]
    assert len(experts) == (1 if kind == "deepseek_v3" else 2)
    assert not any(isinstance(p, torch.nn.Parameter) and p.dim() == 3 for p in source.parameters())
    want = logits(source)
    path = mxfp4.save(source, tmp_path / kind, max_shard_size=100_000)
    ckpt = mxfp4.load(path)
    layer = 1 if kind == "deepseek_v3" else 0
    prefix = f"model.layers.{layer}.mlp.experts.3"
    assert ckpt.tensors[f"{prefix}.up_proj.weight"].shape == (32, 32)  # Quark's per-expert layers
    assert ckpt.tensors[f"{prefix}.down_proj.weight_scale"].shape == (64, 1)
    assert (f"{prefix}.gate_proj.bias" in ckpt) is (kind == "gpt_oss")
    model = tiny(kind, device="meta")
    mxfp4.quantize_(model, checkpoint=path, device="cpu")
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    assert torch.equal(logits(model), want)
    loaded = model.get_submodule(f"model.layers.{layer}.mlp.experts")
    assert loaded.accumulation is experts[0].accumulation
    for b in ("gate_up_data", "gate_up_scales", "down_data", "down_scales"):
        assert torch.equal(loaded.get_buffer(b), experts[0].get_buffer(b))


def gptoss_checkpoint(source, path, drop=()):
    """``source`` (a bf16 GPT-OSS model) written as OpenAI's GPT-OSS MXFP4 checkpoints are: each experts
    module's ``gate_up_proj`` / ``down_proj`` as ``*_blocks`` [E, N, K/32, 16] / ``*_scales`` [E, N, K/32]
    (N the output rows: gate_up_proj [E, H, 2I] transposed), biases beside them, everything else bf16."""
    from . import quark_export

    tensors = {}
    for key, t in source.state_dict().items():
        if key.endswith("experts.gate_up_proj") or key.endswith("experts.down_proj"):
            w = mxfp4.quantize(t.transpose(1, 2).contiguous())  # [E, N, K]
            e, n, k = w.shape
            tensors[f"{key}_blocks"] = w.data.reshape(e, n, k // 32, 16)
            tensors[f"{key}_scales"] = w.scales
        else:
            tensors[key] = t
    for key in drop:
        del tensors[key]
    config = {**source.config.to_dict(),
              "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                                          "model.embed_tokens",
                                                                                          "lm_head"]}}
    quark_export.write_checkpoint(path, tensors, config, shards=2)
    return path


def test_gptoss_checkpoint_loads_its_experts_on_meta(tmp_path):
    """A GPT-OSS checkpoint: experts from *_blocks / *_scales with their biases, every linear layer the
    model's bf16 one; logits bit-identical to the bf16 model with only its experts quantized in memory."""
    source = tiny("gpt_oss")
    path = gptoss_checkpoint(source, tmp_path / "gptoss")
    bias = source.model.layers[1].mlp.experts.gate_up_proj_bias.detach().clone()
    want = logits(mxfp4.quantize_(source, lambda m, n: moe.experts_layout(m) is not None))
    model = tiny("gpt_oss", device="meta")
    mxfp4.quantize_(model, checkpoint=path)
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear
    assert isinstance(model.model.layers[1].mlp.experts, mxfp4.nn.MXFP4Experts)
    assert torch.equal(logits(model), want)

    experts = mxfp4.checkpoint.load_gptoss_experts(path)
    gate_up = experts["model.layers.1.mlp.experts.gate_up_proj"]
    assert torch.equal(gate_up.bias, bias)
    assert gate_up.weights.num_experts == 4 and gate_up.weights.n == 64
    loaded = model.model.layers[1].mlp.experts.weights("gate_up")
    assert torch.equal(gate_up.weights.weight.data, loaded.weight.data)


def test_experts_checkpoint_errors_name_the_tensor_or_layer(tmp_path):
    import json

    path = mxfp4.save(mxfp4.quantize_(tiny("deepseek_v3")), tmp_path / "ds")
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"]["exclude"].append(r"re:.*experts\.3\.")
    (path / "config.json").write_text(json.dumps(config))
    model = tiny("deepseek_v3", device="meta")
    with pytest.raises(ValueError, match=r"layer 'model.layers.1.mlp.experts.3.gate_proj': quantization_config."
                                         r"exclude makes it FLOAT; the experts of 'model.layers.1.mlp.experts' load "
                                         "as MXFP4 only"):
        mxfp4.quantize_(model, checkpoint=path)
    assert model.model.layers[1].mlp.experts.gate_up_proj.is_meta  # unchanged

    path = gptoss_checkpoint(tiny("gpt_oss"), tmp_path / "gptoss", drop=["model.layers.0.mlp.experts.down_proj_bias"])
    with pytest.raises(ValueError, match=r"'model.layers.0.mlp.experts.down_proj_bias' is missing \(experts "
                                         r"'model.layers.0.mlp.experts' have biases"):
        mxfp4.quantize_(tiny("gpt_oss", device="meta"), checkpoint=path)
