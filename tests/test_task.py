"""The competition interface on the CPU: inputs, layouts and errors; on a Hopper GPU (marker gpu) every
test and benchmark shape exact and the same bits on 100 more calls."""
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

# ---- on a Hopper GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, seed", task.TEST_SHAPES + task.BENCHMARK_SHAPES)
def test_task_shapes_exact_and_deterministic(m, n, k, seed):
    data = task.generate_input(m, n, k, seed, "cuda")
    out = task.custom_kernel(data)
    w = MXFP4Tensor(data[3], data[4], (n, k), Layout.AITER_SHUFFLED)
    report = testing.check_gemm(out, data[0], w)
    assert report.passed, report
    assert all(torch.equal(out, task.custom_kernel(data)) for _ in range(100))
