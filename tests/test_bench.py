"""The benchmark and the command line on the CPU reference path."""
from mxfp4 import cli
from mxfp4.bench import harness
from mxfp4.bench.shapes import parse_shapes


def test_cpu_bench_says_which_path_and_is_exact(tmp_path):
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine benchmarks the GPU path")
    lines = []
    text = harness.run(parse_shapes(["4,64,128"]), tmp_path / "r.csv", progress=lines.append)
    assert "CPU reference path" in lines[0]
    assert "| 4x64x128 |" in text and "100.0000%" in text
    assert (tmp_path / "r.csv").read_text().count("\n") == 2


def test_cli_errors_are_clean(capsys):
    assert cli.main(["bench", "--shapes", "4,64,100"]) == 2
    assert "multiple of 64" in capsys.readouterr().err


def test_bench_model_tiny_on_cpu(tmp_path):
    """The model benchmark end to end at the test size: eager and torch.compile(fullgraph=True) generate the
    same tokens, every MXFP4 layer output is within the stated bound of the float64 oracle."""
    import csv

    from mxfp4.bench import llama, model

    record = tmp_path / "model.csv"
    text = model.run(llama.TINY, 2, 4, 3, "cpu", record, ("eager", "compile"), progress=lambda s: None)
    with open(record) as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["mode"]) for r in rows] == [("bf16", "eager"), ("mxfp4", "eager"), ("mxfp4", "compile")]
    assert all(r["tokens_equal_eager"] == "True" for r in rows)
    assert int(rows[1]["weight_bytes"]) < int(rows[0]["weight_bytes"]) / 2
    assert ", 0 outside the stated bound, 0 NaN/Inf mismatches" in text


def test_bench_model_from_a_checkpoint_on_cpu(tmp_path, capsys):
    """--make-checkpoint then --checkpoint: the model built on meta, loaded, byte-identical to the in-memory one."""
    pytest = __import__("pytest")
    pytest.importorskip("safetensors")
    assert cli.main(["bench-model", "--tiny", "--device", "cpu", "--make-checkpoint", str(tmp_path / "ck")]) == 0
    assert cli.main(["bench-model", "--tiny", "--device", "cpu", "--checkpoint", str(tmp_path / "ck"), "--batch", "2",
                     "--prompt", "4", "--new-tokens", "3", "--modes", "eager"]) == 0
    out = capsys.readouterr().out
    assert "| mxfp4 | eager |" in out and "| bf16 |" not in out
    assert "model built on meta and loaded onto cpu" in out
    assert "state_dict byte-identical to the in-memory quantized model's: True" in out
    assert ", 0 outside the stated bound, 0 NaN/Inf mismatches" in out
