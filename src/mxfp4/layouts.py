"""aiter's weight and scale layouts, both directions, exact.

Weight shuffle (16, 16) of packed data [N, K/2]: rows in groups of 16, bytes in chunks of 32;
each (16-row group, 32-byte chunk) becomes 512 contiguous bytes ordered
[half of the chunk (2)][row in group (16)][byte (16)]. Each run of 16 bytes is one MX block
(32 elements) of one row.

Scale shuffle of e8m0 bytes [rows, cols]: padded with 127 to [ceil(rows/256)*256,
ceil(cols/8)*8]; row r, column c of the padded array goes to flat offset
``(r % 32) // 16 + 2 * ((c % 8) // 4) + 4 * (r % 16) + 64 * (c % 4) + 256 * (c // 8)
+ 32 * padded_cols * (r // 32)``.
"""
from __future__ import annotations

import torch

SCALE_PAD_VALUE = 127
"""Byte written into the padding of a shuffled scale array (e8m0 for 1.0), as the task's reference does."""


def _require_uint8_2d(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.uint8:
        raise TypeError(f"{name} must be uint8, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(x.shape)}")


def _check_weight_shape(rows: int, cols: int, name: str) -> None:
    if rows % 16:
        raise ValueError(f"{name} rows (N = {rows}) must be a multiple of 16 for the (16, 16) shuffle")
    if cols % 32:
        raise ValueError(f"{name} bytes per row (K/2 = {cols}) must be a multiple of 32 (K % 64 == 0)")


def shuffle_weight(data: torch.Tensor) -> torch.Tensor:
    """Packed MXFP4 [N, K/2] -> aiter's (16, 16) shuffled layout, same shape."""
    _require_uint8_2d(data, "data")
    n, kb = data.shape
    _check_weight_shape(n, kb, "data")
    tiles = data.reshape(n // 16, 16, kb // 32, 2, 16).permute(0, 2, 3, 1, 4)
    return tiles.contiguous().reshape(n, kb)


def unshuffle_weight(shuffled: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`shuffle_weight`."""
    _require_uint8_2d(shuffled, "shuffled")
    n, kb = shuffled.shape
    _check_weight_shape(n, kb, "shuffled")
    tiles = shuffled.reshape(n // 16, kb // 32, 2, 16, 16).permute(0, 3, 1, 2, 4)
    return tiles.contiguous().reshape(n, kb)


def shuffled_scale_shape(rows: int, cols: int) -> tuple[int, int]:
    """Shape of the shuffled, padded scale array for [rows, cols] e8m0 bytes."""
    return -(-rows // 256) * 256, -(-cols // 8) * 8


def shuffle_scales(scales: torch.Tensor) -> torch.Tensor:
    """e8m0 bytes [rows, K/32] -> aiter's shuffled layout [ceil(rows/256)*256, ceil(K/32/8)*8]."""
    _require_uint8_2d(scales, "scales")
    rows, cols = scales.shape
    prow, pcol = shuffled_scale_shape(rows, cols)
    padded = torch.full((prow, pcol), SCALE_PAD_VALUE, dtype=torch.uint8, device=scales.device)
    padded[:rows, :cols] = scales
    # dims: (r // 32, (r % 32) // 16, r % 16, c // 8, (c % 8) // 4, c % 4), to the order of the offsets
    tiles = padded.reshape(prow // 32, 2, 16, pcol // 8, 2, 4).permute(0, 3, 5, 2, 4, 1)
    return tiles.contiguous().reshape(prow, pcol)


def unshuffle_scales(shuffled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`shuffle_scales`: the first ``rows`` x ``cols`` bytes, unpadded."""
    _require_uint8_2d(shuffled, "shuffled")
    if rows < 0 or cols < 0:
        raise ValueError(f"rows and cols must be non-negative, got {rows}, {cols}")
    prow, pcol = shuffled_scale_shape(rows, cols)
    if tuple(shuffled.shape) != (prow, pcol):
        raise ValueError(
            f"shuffled must have shape {(prow, pcol)} for {rows} x {cols} scales "
            f"(rows padded to 256, columns to 8), got {tuple(shuffled.shape)}"
        )
    tiles = shuffled.reshape(prow // 32, pcol // 8, 4, 16, 2, 2).permute(0, 5, 3, 1, 4, 2)
    return tiles.contiguous().reshape(prow, pcol)[:rows, :cols].contiguous()
