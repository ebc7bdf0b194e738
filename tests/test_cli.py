"""The ``mxfp4`` command on a CPU machine."""
import subprocess
import sys

import pytest
import torch

from mxfp4.cli import main

cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")


def test_info_names_the_backend(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "mxfp4 0.1.0" in out and ("reference" in out or "triton" in out)


@cpu_only
def test_check_runs_the_task_shapes_on_the_reference_path(capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "CPU reference path" in out and out.count("pass") >= 4 and "all passed" in out


@cpu_only
def test_tune_needs_a_gpu(capsys):
    assert main(["tune", "--shapes", "4,64,128"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_tune_kernel_list_names_an_unknown_kernel(capsys):
    with pytest.raises(SystemExit):
        main(["tune", "--kernel", "int8,int9"])
    assert "unknown kernel(s) int9" in capsys.readouterr().err


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "mxfp4", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "bench" in done.stdout and "tune" in done.stdout
