"""Host memory of a meta-device load: a ~270 MB checkpoint (a Llama of hidden 2048, 8 layers; ~1 GB in
bf16) loaded with device="cpu" in a fresh process. The growth of peak RSS over the process's baseline
must stay below the loaded model's own bytes plus the largest checkpoint tensor plus 48 MiB: tensors
are read one at a time, with no memory map and no bf16 weight (measured on the 2-core CI machine:
5-23 MiB above the model's bytes).

glibc's mmap threshold is pinned at 1 MiB in that process: left dynamic, it rises to the size of the
first freed read buffer, later buffers come from the heap, and freed ones stay there as reusable free
space that RSS counts (seen: 15 to 140 MiB more, run to run), which measures the allocator's caching,
not what the loader holds."""
import json
import os
import subprocess
import sys

import pytest
import torch

from . import quark_export

transformers = pytest.importorskip("transformers")

CONFIG = dict(vocab_size=2048, hidden_size=2048, intermediate_size=8192, num_hidden_layers=8, num_attention_heads=16,
              num_key_value_heads=4, max_position_embeddings=256, tie_word_embeddings=False)
SLACK = 48 * 2**20

SCRIPT = r"""
import json, sys, torch, transformers, mxfp4
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
with torch.device("meta"):
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**json.loads(sys.argv[2]))).to(torch.bfloat16)
ckpt = mxfp4.load(sys.argv[1])
base = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # resets VmHWM, the peak, to the current RSS
mxfp4.quantize_(model, checkpoint=ckpt, device="cpu")
kept = sum(t.numel() * t.element_size() for t in {id(t): t for t in [*model.parameters(), *model.buffers()]}.values())
print(json.dumps({"base": base, "peak": status("VmHWM:"), "kept": kept,
                  "largest": max(i.nbytes for i in ckpt.tensors.values()),
                  "total": sum(i.nbytes for i in ckpt.tensors.values())}))
"""


def _checkpoint(path):
    """Random MXFP4 bytes in the published layout, written tensor by tensor (never a bf16 model)."""
    cfg = transformers.LlamaConfig(**CONFIG)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for key, t in model.state_dict().items():
        owner, _, attr = key.rpartition(".")
        if attr == "weight" and t.dim() == 2 and owner != "lm_head" and "embed" not in owner:
            n, k = t.shape
            tensors[key] = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
            tensors[f"{owner}.weight_scale"] = torch.randint(118, 128, (n, k // 32), dtype=torch.uint8, generator=gen)
            if owner.endswith(("k_proj", "v_proj")):
                tensors[f"{owner}.output_scale"] = torch.tensor(0.5)
        else:
            tensors[key] = (torch.randn(t.shape, generator=gen) * 0.02).to(torch.float32 if "norm" in key
                                                                          else torch.bfloat16)
    quark_export.write_checkpoint(path, tensors, {**cfg.to_dict(), "quantization_config": quark_export.PUBLISHED},
                                  shards=3)
    return path


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux /proc peak-RSS reset")
def test_meta_load_holds_one_tensor_at_a_time(tmp_path):
    path = _checkpoint(tmp_path / "big")
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(2**20),
           "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(path), json.dumps(CONFIG)], env=env, check=True,
                         capture_output=True, text=True, timeout=120)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    growth = r["peak"] - r["base"]
    print(f"checkpoint {r['total'] / 2**20:.0f} MiB, loaded model {r['kept'] / 2**20:.0f} MiB, largest tensor "
          f"{r['largest'] / 2**20:.0f} MiB, peak RSS growth {growth / 2**20:.0f} MiB")
    assert r["total"] > 200 * 2**20
    assert growth <= r["kept"] + r["largest"] + SLACK
