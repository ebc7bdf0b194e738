"""What the CUDA backend needs to know about a device: whether its kernels run there (a Hopper GPU,
compute capability 9.0) and how many SMs it has. A leaf: it imports nothing of mxfp4's, so every
layer (the tensor type's quantize, the GEMM, the benchmarks) can ask it."""
from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def _facts(index: int) -> tuple[tuple[int, int], int]:
    props = torch.cuda.get_device_properties(index)
    return (props.major, props.minor), props.multi_processor_count


def cuda_supported(device: torch.device) -> bool:
    """True when the CUDA kernels run on ``device`` (a Hopper GPU, compute capability 9.0)."""
    hopper = _hopper.get(device)
    if hopper is None:
        if device.type != "cuda":
            return False
        if device.index is None:  # the current device, which can change: not remembered
            return _facts(torch.cuda.current_device())[0] == (9, 0)
        hopper = _hopper[device] = _facts(device.index)[0] == (9, 0)
    return hopper


_hopper: dict[torch.device, bool] = {}
"""cuda_supported's answer per indexed CUDA device (a tensor's device has its index): one dict lookup
on every GEMM call."""


def sm_count(index: int) -> int:
    """Streaming multiprocessors of CUDA device ``index`` (the kernels' grids are sized by it)."""
    return _facts(index)[1]


__all__ = ["cuda_supported", "sm_count"]
