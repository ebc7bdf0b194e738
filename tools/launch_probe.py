"""What a launch costs under the timing rule, by the shared memory its programs ask for (GPU).

One compiled kernel (each program writes one word), launched with GRID programs asking for
SHARED bytes of dynamic shared memory each (the launch's request only: the kernel does not touch
it), timed cold (L2 flushed, the bench's rule). The work is the same for every request, so a
difference is the cost of the request itself (the SMs' L1 / shared memory split set for it).

Then, with no shared memory: each program reads one float32 from page (pid % PAGES) of a large
buffer (pages 2 MB apart) and writes it: the same bytes for every PAGES, so a difference is the
cost of first touching more pages after the flush (address translation).

Then the code's size: each program runs a chain of N dependent float FMAs, unrolled (N FMAs of
straight-line code, as the kernels' element-wise work compiles) or in a loop of 8 FMAs per trip
(the same chain in little code). After the flush the code too comes from DRAM, so a difference
beyond the loop's own overhead is the cost of fetching cold instructions.

Usage (on the GPU box, from the repo root): PYTHONPATH=src python3 tools/launch_probe.py [GRID ...]
"""
from __future__ import annotations

import ctypes
import sys

import torch
import triton
import triton.language as tl

from mxfp4.bench.timing import ColdTimer

SHARED_KB = (0, 16, 32, 48, 64, 100, 132, 164, 196, 227)
_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


@triton.jit
def _one_word_kernel(c_ptr):
    tl.store(c_ptr + tl.program_id(0), 1.0)


@triton.jit
def _page_kernel(src_ptr, c_ptr, PAGES, PAGE_WORDS):
    pid = tl.program_id(0)
    tl.store(c_ptr + pid, tl.load(src_ptr + (pid % PAGES).to(tl.int64) * PAGE_WORDS + pid))


@triton.jit
def _chain_kernel(c_ptr, n, N: tl.constexpr, UNROLLED: tl.constexpr):
    x = tl.program_id(0).to(tl.float32)
    if UNROLLED:
        for _ in tl.static_range(N):
            x = x * 0.999 + 0.001
    else:
        for _ in range(n // 8):
            for _ in tl.static_range(8):
                x = x * 0.999 + 0.001
    tl.store(c_ptr + tl.program_id(0), x)


def main(argv: list[str]) -> None:
    grids = [int(g) for g in argv] or [132, 264]
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=20, max_runs=80, budget_s=0.5).mean_us  # noqa: E731
    c = torch.zeros(max(grids), dtype=torch.float32, device="cuda")
    ck = _one_word_kernel.warmup(c, grid=(1,))
    ck._init_handles()
    cuda = ctypes.CDLL("libcuda.so.1")
    warps, ctas, _ = ck.packed_metadata
    print(f"{'shared KB':>9} " + " ".join(f"{'grid ' + str(g):>10}" for g in grids) + "  (us, two rounds)")
    for kb in SHARED_KB:
        status = cuda.cuFuncSetAttribute(ctypes.c_void_p(ck.function), _MAX_DYNAMIC_SHARED, ctypes.c_int(kb * 1024))
        if status != 0:
            print(f"{kb:>9} cuFuncSetAttribute failed ({status})")
            continue
        ck.packed_metadata = (warps, ctas, kb * 1024)
        cells = []
        for g in grids:
            if kb * 1024 * (g // 132) > 228 * 1024:
                cells.append("-")  # cannot be resident at once; not what is measured here
                continue
            times = [t(lambda: ck[(g, 1, 1)](c)) for _ in range(2)]
            cells.append(f"{times[0]:.2f}/{times[1]:.2f}")
        print(f"{kb:>9} " + " ".join(f"{x:>10}" for x in cells), flush=True)
    page_words = (2 << 20) // 4
    src = torch.ones(264 * page_words, dtype=torch.float32, device="cuda")
    print(f"{'pages':>9} " + " ".join(f"{'grid ' + str(g):>10}" for g in grids) + "  (us, two rounds)")
    for pages in (1, 2, 8, 32, 132, 264):
        cells = []
        for g in grids:
            times = [t(lambda: _page_kernel[(g,)](src, c, pages, page_words)) for _ in range(2)]
            cells.append(f"{times[0]:.2f}/{times[1]:.2f}")
        print(f"{pages:>9} " + " ".join(f"{x:>10}" for x in cells), flush=True)
    print(f"{'FMA chain':>18} {'code KB':>8} " + " ".join(f"{'grid ' + str(g):>10}" for g in grids))
    for n in (256, 1024, 2048, 4096):
        for unrolled in (False, True):
            launch = lambda g: _chain_kernel[(g,)](c, n, N=n, UNROLLED=unrolled)  # noqa: E731
            launch(grids[0])
            torch.cuda.synchronize()
            code = [ck for cache in _chain_kernel.device_caches.values() for ck in cache[0].values()][-1]
            size = len(code.asm["cubin"]) / 1024
            cells = []
            for g in grids:
                times = [t(lambda: launch(g)) for _ in range(2)]
                cells.append(f"{times[0]:.2f}/{times[1]:.2f}")
            print(f"{n:>6} {'unrolled' if unrolled else 'loop x8':>11} {size:>8.1f} " +
                  " ".join(f"{x:>10}" for x in cells), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
