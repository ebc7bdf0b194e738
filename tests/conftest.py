"""Shared fixture: the task's old pure-PyTorch reference, loaded from the `shared` folder beside the repo.

The folder holds the competition's public files (read-only, also present in CI). They are imported
at test time only, as an external oracle; nothing from them is copied into the project.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

if not torch.cuda.is_available():
    # No GPU: the Triton kernels run under the CPU interpreter. Must be set before any
    # @triton.jit function is created (mxfp4 imports its kernels lazily, at first launch).
    os.environ.setdefault("TRITON_INTERPRET", "1")

SHARED_TASK = Path(__file__).resolve().parents[2] / "shared" / "task"
"""Where reference_torch_old.py lives (with its siblings task.py and utils.py)."""

_SIBLINGS = ("reference_torch_old", "task", "utils")


def load_old_reference() -> ModuleType | None:
    """Import shared/task/reference_torch_old.py, or return None when the folder is absent.

    The folder goes on sys.path only for the import, and the top-level names it brings
    (``task``, ``utils``) are taken back out of sys.modules so they shadow nothing else.
    """
    if not (SHARED_TASK / "reference_torch_old.py").is_file():
        return None
    saved = {name: sys.modules.pop(name) for name in _SIBLINGS if name in sys.modules}
    sys.path.insert(0, str(SHARED_TASK))
    try:
        return importlib.import_module("reference_torch_old")
    finally:
        sys.path.remove(str(SHARED_TASK))
        for name in _SIBLINGS:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


@pytest.fixture(scope="session")
def old_ref() -> ModuleType:
    """The old task reference (quantize_mxfp4, shuffle_weights, shuffle_scales, ...); skips if absent."""
    module = load_old_reference()
    if module is None:
        pytest.skip(f"task reference not found at {SHARED_TASK} (the shared folder beside the repo)")
    return module
