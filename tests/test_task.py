"""The competition interface on the CPU: inputs, layouts and errors."""
import pytest
import torch

from mxfp4 import task, testing
from mxfp4.tensor import Layout, MXFP4Tensor


def test_generate_input_layouts_agree():
    a, b, bq, bsh, bss = task.generate_input(8, 64, 128, 1, "cpu")
    w = MXFP4Tensor(bsh, bss, (64, 128), Layout.AITER_SHUFFLED)
    assert torch.equal(w.to_layout(Layout.PLAIN).data, bq)


def test_custom_kernel_is_exact_on_a_test_shape():
    data = task.generate_input(16, 256, 512, 6635, "cpu")
    w = MXFP4Tensor(data[3], data[4], (256, 512), Layout.AITER_SHUFFLED)
    report = testing.check_gemm(task.custom_kernel(data), data[0], w)
    assert report.passed and report.identical_fraction == 1.0


@pytest.mark.parametrize("data, match", [
    (None, "data must be the task's tuple"),
    ((torch.zeros(64),) * 5, "A must be a 2-D"),
])
def test_custom_kernel_errors(data, match):
    with pytest.raises((TypeError, ValueError), match=match):
        task.custom_kernel(data)


def test_generate_input_without_cuda_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match="CUDA"):
        task.generate_input(8, 64, 128, 1)
