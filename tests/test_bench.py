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
