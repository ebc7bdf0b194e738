"""Test configuration: the ``gpu`` marker runs only where the CUDA kernels can (a Hopper GPU)."""
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
