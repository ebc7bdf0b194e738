"""The kernels' parameter sets: one compiled variant (or launch) of each GEMM, and the problem it runs.

``SmallParams``: ``cuda/csrc/gemm_small.cu`` (one launch at short K, no ring, no K split across
CTAs); ``DecodeParams``: ``cuda/csrc/gemm_decode.cu`` (A quantized once, then the GEMM);
``StreamParams``: ``cuda/csrc/gemm_stream.cu`` (A quantized once, then the weight streamed through a
ring, every SM an equal share); ``BandParams``: ``cuda/csrc/gemm_band.cu`` (the same streaming with A in
three bands and each segment's block sums added inside the tensor core); ``WgmmaParams``:
``cuda/csrc/gemm_wgmma.cu`` (the large-M kernels);
``GroupedStreamParams``: the streaming GEMM grouped over a mixture of experts (decode); ``GroupedWgmmaParams``:
the large-M kernels grouped over the experts (prefill). Each states its kernel's shared memory (the kernel
exports its own, and the tests compare them), checks what the kernel needs and says which problems it
takes; :mod:`mxfp4.plan` chooses among them (and names them too).

One module a kernel source: ``small.py``, ``decode.py``, ``stream.py`` (``StreamParams`` with
``GroupedStreamParams``, and ``BandParams``), ``wgmma.py`` (with ``GroupedWgmmaParams``);
``problem.py``: the problem and the limits they all check against.
"""
from .decode import DecodeParams
from .problem import MAX_GRID_Y, SEGMENT_BLOCKS, SMEM_LIMIT, Problem, valid
from .small import SmallParams
from .stream import BAND_MAX_K, GROUPED_STATIC_SMEM, BandParams, GroupedStreamParams, StreamParams
from .wgmma import GroupedWgmmaParams, WgmmaParams

__all__ = ["SMEM_LIMIT", "MAX_GRID_Y", "SEGMENT_BLOCKS", "BAND_MAX_K", "GROUPED_STATIC_SMEM", "Problem", "valid",
           "SmallParams", "DecodeParams", "StreamParams", "BandParams", "WgmmaParams", "GroupedStreamParams",
           "GroupedWgmmaParams"]
