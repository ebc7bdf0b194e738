"""Test configuration: the ``gpu`` marker runs only where the CUDA kernels can (a Hopper GPU); the
checkpoint tests' ``saved`` fixture."""
import pytest
import torch


def hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def pytest_collection_modifyitems(config, items):
    if hopper():
        return
    skip = pytest.mark.skip(reason="needs a Hopper GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(directory, logits) of tiny_llama(0) quantized directly (its linear layers run the exact reference)."""
    import mxfp4

    from .checkpoints import logits, tiny_llama

    model = mxfp4.quantize_(tiny_llama(0))
    path = mxfp4.save(model, tmp_path_factory.mktemp("quark"))
    return path, logits(model), model
