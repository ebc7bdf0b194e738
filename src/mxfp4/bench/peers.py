"""Third-party GEMMs that ``mxfp4 bench --peer`` times beside ours: humming-kernels (vllm-project/humming).

humming serves MXFP4 weights on Hopper with one templated wgmma kernel, generated per configuration and
compiled with NVRTC at its first call. It has no W4A4 on sm_90, so the bench times the two modes it has,
on our weights converted once to its "mxfp4" schema (:func:`humming_tensors`):

* W4A8: humming quantizes A to fp8 e4m3 (one scale a row) in a launch of its own, then runs the GEMM;
* W4A16: A stays bf16.

Neither computes the task's function (A in MXFP4); both are what serving these weights with humming costs.
A timed call is ``layer(a, tuning_config=...)``, activation quantization included. The tuning config is
humming's own heuristic choice for the benchmarked M, handed in so that humming compiles that one kernel
(without it, the first call compiles one for every M interval of its table). Written against
humming-kernels 0.1.19.
"""
from __future__ import annotations

import json
from typing import Callable

import torch

from ..tensor import Layout, MXFP4Tensor, dequantize

PEERS = ("humming",)

HUMMING_WHEEL = "humming_kernels-0.1.19-cp310-abi3-manylinux_2_28_x86_64.whl"

HUMMING_MODES = {"w4a8": {"dtype": "float8e4m3"}, "w4a16": {"dtype": "bfloat16"}}
"""The modes timed: humming's input config (the dtype its layer feeds the GEMM with A in) per mode."""


def humming_tensors(w: MXFP4Tensor) -> dict[str, torch.Tensor]:
    """``w`` in humming's "mxfp4" weight schema: ``weight``, the e2m1 codes as uint8 [N, K/2] with element 2j
    in the low nibble, and ``weight_scale``, the e8m0 bytes as uint8 [N, K/32]. That is our PLAIN layout: a
    shuffled weight is unshuffled (its padding dropped), a plain one is returned as it is."""
    if not isinstance(w, MXFP4Tensor):
        raise TypeError(f"w must be an MXFP4Tensor, got {type(w).__name__}")
    if len(w.shape) != 2:
        raise ValueError(f"w must be a 2-D weight [N, K], got shape {w.shape}")
    plain = w.to_layout(Layout.PLAIN)
    return {"weight": plain.data.contiguous(), "weight_scale": plain.scales.contiguous()}


def w4a16_error(out: torch.Tensor, a: torch.Tensor, w: MXFP4Tensor, rows: torch.Tensor | None = None) -> float:
    """``max |out - A W^T| / max |A W^T|`` over ``rows`` (all when None), the product in float64 of the bf16 A
    and ``w``'s values: what a W4A16 output computed on ``w`` should be within bf16 rounding of (humming on
    the H200: 2e-3 to 8e-3)."""
    if rows is not None:
        out, a = out[rows.to(out.device)], a[rows.to(a.device)]
    exact = a.double() @ dequantize(w, torch.float64).T
    return float((out.double() - exact).abs().max() / exact.abs().max().clamp_min(1e-300))


class Humming:
    """humming's dense MXFP4 layer, one per (weight, M, mode); made by :func:`load`."""

    name = "humming"

    def __init__(self) -> None:
        import humming
        from humming.layer import HummingLayer
        from humming.tune import get_heuristics_config

        self.version = humming.__version__
        self._layer, self._heuristics = HummingLayer, get_heuristics_config

    def calls(self, w: MXFP4Tensor, m: int) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
        """Per mode of :data:`HUMMING_MODES`, ``a -> C`` for a bf16 ``a`` [m, K] on ``w``'s device (CUDA): a
        humming layer built on ``w`` and its kernel for M = ``m`` (compiled at the first call)."""
        return {mode: self._call(w, m, config) for mode, config in HUMMING_MODES.items()}

    def _call(self, w: MXFP4Tensor, m: int, input_config: dict) -> Callable[[torch.Tensor], torch.Tensor]:
        n, k = w.shape
        tensors = humming_tensors(w)
        # humming's sm_90 heuristics have no tile for bf16 A unless N % 128 == 0 (2880, 2112 raise an
        # AssertionError); its layer then pads N to 128 itself, the output staying [M, N]
        pads = (1, 128) if n % 128 else (1,)
        for pad in pads:
            try:
                layer = self._layer(shape_n=n, shape_k=k, weight_config={"quant_method": "mxfp4"},
                                    input_config={"quant_method": "humming", **input_config},
                                    pad_n_to_multiple=pad, torch_dtype=torch.bfloat16).to(w.device)
                layer.load_from_tensors(tensors)
                layer.transform()
                tuning = json.dumps(self._heuristics(layer.humming_config, shape_m=m, device=w.device))
                break
            except AssertionError:
                if pad == pads[-1]:
                    raise
        return lambda a: layer(a, tuning_config=tuning)


def load(name: str) -> Humming:
    """The driver of the peer ``name`` (one of :data:`PEERS`). ImportError naming the package and how to
    install it when it does not import here."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
    try:
        return Humming()
    except ImportError as e:
        raise ImportError(
            f"--peer humming needs the package humming-kernels 0.1.19 (vllm-project/humming), which does not import "
            f"here ({e}). Install its wheel: pip install {HUMMING_WHEEL} (in ../shared/peers/), or pip install "
            f"humming-kernels==0.1.19; it compiles its kernels with NVRTC and needs a CUDA 13 toolkit's headers") from e
