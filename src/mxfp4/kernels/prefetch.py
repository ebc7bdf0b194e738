"""Prefetches on the int8 paths: the folded weight's first bytes in L2, and tensor maps.

@triton.jit code (and :func:`tensormap_asm`, which builds PTX text on the host); GPU only (inline
PTX with no interpreter path: the launchers use none of it under the interpreter).

Weight prefetchers: on the two-launch int8 path the multiply's first K step waits for the
weight's first trip from DRAM, which nothing else in the call hides: the multiply cannot start
its loads before the fold's launch has ended (programmatic dependent launch). Programs added to
the fold's grid, which trigger the dependent launch at once and then only issue bulk L2
prefetches (``cp.async.bulk.prefetch.L2``: no wait, no register or shared memory), let that trip
run while A is folded. H200 (seventeenth session, docs/results/s17/): 14 layers at M = 64 .. 1024
11.17 -> 10.94 us geomean with 512 bytes a row; whole rows, or one prefetch per split-K segment,
held the fold's launch open and lost (see :func:`mxfp4.launch.w_prefetch_bytes`). Where K is
1536 or more (and N at most 8192) they first wait 500 ns, so that the fold's loads of A go out
first (seventeenth and eighteenth sessions: 20 of 23 such layers 0.03-0.48 us faster, three
level; :func:`mxfp4.launch.w_prefetch_delay`).

Tensor maps: a program's first TMA load through a descriptor otherwise fetches the descriptor
first; :func:`prefetch_tensormaps` at a kernel's start asks for it early (eighteenth session:
16 layers 13.23 -> 13.16 us geomean, docs/results/s18/tmap-run10.txt).
"""
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer


@triton.jit
def _bulk_prefetch_l2(addr, size, ok):
    """``cp.async.bulk.prefetch.L2`` of [addr, addr + size) (int64 address and size both
    multiples of 16) where ``ok``."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $3, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r,r", [addr, size, ok.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_tensormaps(x, ASM: tl.constexpr):
    """Run ``ASM``, the ``prefetch.tensormap`` of a kernel's tensor descriptor parameters (see
    :func:`tensormap_asm`); ``x``: any int32 scalar of the program."""
    tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


FIRST_TWO_DESCRIPTORS = (0, 5)
"""PTX parameter indices of a kernel's first two arguments where both are 2-D tensor descriptors:
each is passed as one 128-byte tensor map followed by its shape (2 x i32) and strides (2 x i64)."""


def tensormap_asm(kernel: str, params: tuple[int, ...] = FIRST_TWO_DESCRIPTORS) -> str:
    """PTX that asks for the tensor maps of parameters ``params`` of kernel ``kernel`` (by their
    PTX names, ``<kernel>_param_<i>``) to be fetched into the cache the TMA unit reads them from."""
    body = "".join(f"mov.b64 t, {kernel}_param_{i}; cvta.param.u64 t, t; prefetch.tensormap [t]; " for i in params)
    return "{ .reg .b64 t; " + body + "mov.u32 $0, 0; }"


@triton.jit
def wait_ns(delay_ns):
    """Spin until ``delay_ns`` nanoseconds have passed (none for 0)."""
    if delay_ns > 0:
        t0 = globaltimer()
        t = t0
        while t - t0 < delay_ns:
            t = globaltimer()


@triton.jit
def prefetch_w_rows(w_ptr, N, K, seg_bytes, NSEG, pf_bytes, part, parts, NT: tl.constexpr):
    """Ask for the first ``pf_bytes`` of each segment (``seg_bytes`` of K; the last may be
    shorter) of rows [part * per, (part + 1) * per) of the row-major int8 weight [N, K] in L2,
    per = ceil(N / parts): one bulk prefetch per row and segment, NT rows at a time."""
    per = tl.cdiv(N, parts)
    lo = part * per
    hi = tl.minimum(lo + per, N)
    t = tl.arange(0, NT)
    for seg in range(NSEG):
        k0 = seg * seg_bytes
        size = tl.minimum(pf_bytes, tl.minimum(seg_bytes, K - k0))
        for r0 in range(lo, hi, NT):
            row = r0 + t
            addr = (w_ptr + row.to(tl.int64) * K + k0).to(tl.int64, bitcast=True)
            _bulk_prefetch_l2(addr, tl.full((NT,), 0, tl.int32) + size, row < hi)
