"""Every entry of the shipped H200 table, on the GPU, against the code as it is now.

The tuner checked each pick for exactness when it made it, with the code of that day; kernels
have changed since under many picks. Here each entry's config runs on the entry's shape twice:
on randn data (every row folds: the int8 matmul path) and with row 3's blocks scaled apart (that
row does not fold, so its M tile takes the block-by-block path). Each output must pass the exact
bound with every element written, and A must be folded bit for bit as
:func:`mxfp4.fold.fold_tensor` does. On an H200 with the table's triton the library's own look-up
must also return the entry for its shape.
"""
from pathlib import Path

import pytest
import torch

import mxfp4
from mxfp4 import Layout, fold, ops, testing
from mxfp4.tuning import load_table

from test_int8 import spread_rows

TABLE = load_table(Path(mxfp4.__file__).parent / "configs" / "h200.json")
ENTRIES = sorted(TABLE.entries, key=lambda entry: entry[0])
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("shape, config", ENTRIES, ids=[f"{m}x{n}x{k}-{c.kernel}" for (m, n, k), c in ENTRIES])
def test_shipped_entry_on_gpu(shape, config):
    import triton

    m, n, k = shape
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(m + n + k)
    a = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    w = mxfp4.quantize(torch.randn(n, k, generator=g, device=dev).to(torch.bfloat16)).to_layout(Layout.AITER_SHUFFLED)
    folds = []
    spread = a.clone()
    spread[3:4] = spread_rows(a[3:4], -9, 9, m + n)  # row 3's blocks 2**-9 .. 2**9 apart: it cannot fold
    for x in (a, spread):
        out, folded_a = ops.gemm_a4w4_debug(x, w, config)
        assert not fold.differing_arrays(folded_a, fold.fold_tensor(mxfp4.quantize(x), folded_a.seg_blocks))
        assert not out.isnan().any(), "an output element was left unwritten (or is NaN)"
        assert testing.check_gemm(out, x, w, testing.sample_rows(m)).passed
        folds.append(folded_a.folded)
    assert bool(folds[0].all()), "randn rows were meant to fold"
    if m > 3:
        assert not bool(folds[1][3].all()), "row 3 was meant not to fold"
    if torch.cuda.get_device_name(dev) == TABLE.gpu and triton.__version__ == TABLE.triton:
        assert ops.resolve_config(m, n, k, dev) == config
