"""mxfp4.save's config and tensors through the code paths of vLLM's and SGLang's Quark readers.

The two readers are reimplemented here from their published ``QuarkConfig`` (vllm
model_executor/layers/quantization/quark/quark.py and utils.py; sglang srt/layers/quantization/
quark/quark.py and utils.py): ``from_config`` (``export`` required, ``len(kv_cache_group)``, the KV
entries found by fnmatch in ``layer_quant_config``, their ``output_tensors`` taken as the KV spec
and cleared), the KV validation (fp8_e4m3, per_tensor), ``should_ignore_layer`` (exact or ``re:`` with
re.match), ``_find_matched_config`` (vLLM: substring without '*', fnmatch with it; SGLang: fnmatch;
then layer_type_quant_config, then global), ``_get_scheme_from_config`` (output_tensors or bias set:
not supported) and the MXFP4 predicates (vLLM ``_is_w_ocp_mx_a_x``, SGLang ``_is_mx_fp4``), and vLLM's
``get_cache_scale`` names. Not imported: neither runs without a GPU stack.
"""
import copy
import fnmatch
import json
import re

import pytest
import torch

import mxfp4
from mxfp4.nn import MXFP4Linear

from . import quark_export
from .test_checkpoint_published import tiny

transformers = pytest.importorskip("transformers")


def _deep_compare(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_deep_compare(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return set(a) == set(b)
    return a == b


def _from_config(config: dict, reader: str) -> tuple[dict, dict | None]:
    """(quant_config, kv_cache_config) as the reader's QuarkConfig.from_config leaves them."""
    config = copy.deepcopy(config)
    if reader == "sglang":
        config["packed_modules_mapping"] = {}  # SGLang's loader adds it before from_config
        assert config["quant_method"] == "quark"
    export = config.get("export")
    if export is None:
        raise ValueError("The export key should be included in the configurations of Quark quantized model")
    group = export.get("kv_cache_group")
    if len(group) == 0:  # TypeError when the field is absent, as in both readers
        return config, None
    lqc = config.get("layer_quant_config")
    if reader == "vllm":
        if not (set(group) <= set(lqc) or any(fnmatch.fnmatchcase(k, p) for k in lqc for p in group)):
            raise ValueError("kv_cache_group set, no kv_cache quantization settings")
        q_configs = [c for k, c in lqc.items() if any(fnmatch.fnmatchcase(k, p) for p in group)]
        if not all(_deep_compare(q["output_tensors"], q_configs[0]["output_tensors"]) for q in q_configs):
            raise ValueError("different kv_cache quantization")
    else:
        if not set(group) <= set(lqc):
            raise ValueError("kv_cache_group set, no kv_cache quantization settings")
        q_configs = [lqc.get(name) for name in group]
        if not all(_deep_compare(q, q_configs[0]) for q in q_configs):
            raise ValueError("different kv_cache quantization")
    kv = q_configs[0].get("output_tensors")
    if kv is None:
        raise ValueError("The kv_cache quantization configuration is empty.")
    for q in q_configs:
        q["output_tensors"] = None
    if lqc.get("*q_proj") is not None:
        lqc["*q_proj"]["output_tensors"] = None
    if kv.get("dtype") != "fp8_e4m3" or kv.get("qscheme") != "per_tensor":
        raise NotImplementedError(f"kv cache {kv}")
    return config, kv


def _ignored(name: str, exclude: list[str]) -> bool:
    return any(re.match(t[3:], name) if t.startswith("re:") else t == name for t in exclude)


def _matched(config: dict, name: str, type_name: str, reader: str) -> dict:
    for pattern, cfg in config.get("layer_quant_config").items():
        if reader == "vllm":
            hit = name in pattern if "*" not in pattern else fnmatch.fnmatch(name, pattern)
        else:
            hit = fnmatch.fnmatch(name, pattern)
        if hit:
            return cfg
    types = config.get("layer_type_quant_config")
    if reader == "sglang" and type_name in types:  # vLLM keys it by the type object: never a JSON string
        return types[type_name]
    return config.get("global_quant_config")


def scheme(config: dict, name: str, reader: str, type_name: str = "LinearBase") -> str:
    """'unquantized', 'mxfp4' (QuarkOCP_MX / QuarkW4A4MXFP4), or the reader's error."""
    if _ignored(name, config.get("exclude")):
        return "unquantized"
    cfg = _matched(config, name, type_name, reader)
    if cfg.get("output_tensors") or cfg.get("bias"):
        raise NotImplementedError("Quark models with output_tensors and bias quantized are not supported")
    w, x = cfg.get("weight"), cfg.get("input_tensors")
    if reader == "vllm":
        ok = (w is not None and not isinstance(w, list) and w.get("qscheme") == "per_group"
              and w.get("group_size") == 32 and w.get("scale_format") == "e8m0" and w.get("dtype") == "fp4")
    else:
        ok = (w is not None and x is not None and w.get("dtype") == "fp4" and x.get("dtype") == "fp4"
              and w.get("qscheme") == x.get("qscheme") == "per_group" and w.get("group_size") == 32
              and x.get("group_size") == 32 and w.get("is_dynamic") is not True and x.get("is_dynamic") is not False
              and w.get("scale_format") == x.get("scale_format") == "e8m0")
    if not ok:
        raise NotImplementedError(f"No quark compatible scheme was found: {w}, {x}")
    return "mxfp4"


def cache_scale(name: str) -> str | None:
    """vLLM's get_cache_scale: the attention parameter a checkpoint tensor's KV scale goes to."""
    for proj, attr in ((".k_proj", "k_scale"), (".v_proj", "v_scale"), (".q_proj", "q_scale")):
        if name.endswith(".output_scale") and proj in name:
            return name.replace(f"{proj}.output_scale", f".attn.{attr}")
    return None


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny Llama loaded from a published-layout export (FP8 KV scales), saved by mxfp4.save in shards."""
    src = quark_export.export(tiny("llama"), tmp_path_factory.mktemp("published"))
    model = mxfp4.quantize_(tiny("llama", device="meta"), checkpoint=src)
    out = mxfp4.save(model, tmp_path_factory.mktemp("saved"), max_shard_size="60KB")
    return model, out


@pytest.mark.parametrize("reader", ["vllm", "sglang"])
def test_saved_config_reads_in_vllm_and_sglang(exported, reader):
    model, out = exported
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    parsed, kv = _from_config(config, reader)
    assert kv["dtype"] == "fp8_e4m3" and kv["qscheme"] == "per_tensor"
    for name, m in model.named_modules():
        if isinstance(m, (MXFP4Linear, torch.nn.Linear)):
            want = "mxfp4" if isinstance(m, MXFP4Linear) else "unquantized"
            assert scheme(parsed, name, reader) == want, name
    ckpt = mxfp4.load(out)
    scales = sorted(cache_scale(n) for n in ckpt.tensors if cache_scale(n))
    assert scales == sorted(f"model.layers.{i}.self_attn.attn.{a}" for i in range(2) for a in ("k_scale", "v_scale"))
    for name, m in model.named_modules():  # the tensors the OCP MX scheme creates: uint8 [N, K/2], [N, K/32]
        if isinstance(m, MXFP4Linear):
            w, s = ckpt.tensors[f"{name}.weight"], ckpt.tensors[f"{name}.weight_scale"]
            assert (w.dtype, w.shape, s.dtype, s.shape) == ("U8", (m.out_features, m.in_features // 2),
                                                            "U8", (m.out_features, m.in_features // 32))
    assert len(list(out.glob("model-*-of-*.safetensors"))) >= 2
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(ckpt.tensors) and index["metadata"]["total_size"] == sum(
        i.nbytes for i in ckpt.tensors.values())


@pytest.mark.parametrize("reader", ["vllm", "sglang"])
def test_saved_config_without_kv_scales_reads_too(tmp_path, reader):
    out = mxfp4.save(mxfp4.quantize_(tiny("llama")), tmp_path)
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    parsed, kv = _from_config(config, reader)
    assert kv is None and config["export"]["kv_cache_group"] == []
    assert scheme(parsed, "model.layers.0.mlp.up_proj", reader) == "mxfp4"
    assert scheme(parsed, "lm_head", reader) == "unquantized"
    assert (out / "model.safetensors").exists() and not (out / "model.safetensors.index.json").exists()


def test_the_reimplemented_readers_fail_where_the_published_ones_do():
    """The old block (no export.kv_cache_group) raised in both readers; so does the reimplementation."""
    old = {"quant_method": "quark", "export": {"weight_format": "real_quantized"}, "exclude": [],
           "global_quant_config": {}, "layer_quant_config": {}, "layer_type_quant_config": {}}
    for reader in ("vllm", "sglang"):
        with pytest.raises(TypeError):
            _from_config(old, reader)
    with pytest.raises(ValueError, match="export key"):
        _from_config({"quant_method": "quark"}, "vllm")
