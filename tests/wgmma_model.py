"""A model of the large-M kernel's arithmetic (cuda/csrc/gemm_wgmma.cu), in float32/float64 on the
CPU: the segment fold of A and W, the tile flags, the fast (one term a segment) and slow (one term a
block) paths, the float32 runs of at most 8 terms and 32 blocks, the float64 total and the single
rounding to bf16. The CPU tests hold it to the exact oracle on data the fold must get right; the GPU
tests hold the kernel to it bit for bit."""
import torch

from mxfp4 import formats
from mxfp4.reference import round_to_bf16
from mxfp4.tensor import Layout

SEG = 8
RUN_LIMIT = 32


def _values_and_exponents(codes: torch.Tensor, scales: torch.Tensor):
    """Doubled e2m1 values (int64 [rows, K]) and e8m0 bytes (int64 [rows, K/32])."""
    table = torch.tensor([2 * v for v in formats.E2M1_VALUES], dtype=torch.int64)
    return table[codes.long()], scales.long()


def _half_scale(e: torch.Tensor) -> torch.Tensor:
    """2**(e - 128) as float64 (NaN for 255): half an e8m0 scale, exactly as the kernel's float32."""
    return formats.e8m0_to_float(e, torch.float64) / 2


def _fma32(x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
    """float32 rounding of x + acc, x an exact float64 product that float32 represents: the float64
    sum of two float32 numbers rounds to float32 as one rounding would."""
    return (x + acc.double()).float()


def model(a: torch.Tensor, w, tn: int, stats: dict | None = None) -> torch.Tensor:
    """The kernel's bf16 output [M, N] for bf16 a [M, K] and MXFP4 weight w [N, K] with token tiles
    of ``tn``; ``stats`` (when given) receives the count of outputs' segments taken by each path."""
    m, k = a.shape
    n = w.shape[0]
    nblk = k // 32
    nseg = -(-nblk // SEG)
    codes, sa = formats.quantize_codes(a.cpu())
    av, ea = _values_and_exponents(codes, sa)
    wp = w.to_layout(Layout.PLAIN)
    wv, ew = _values_and_exponents(formats.unpack_codes(wp.data.cpu()), wp.scales.cpu()[:, :nblk])
    mpad = -(-m // tn) * tn
    av = torch.cat([av, av.new_zeros(mpad - m, k)])
    ea = torch.cat([ea, ea.new_zeros(mpad - m, nblk)])
    pad = nseg * SEG - nblk  # blocks past K: zero values
    av = torch.cat([av, av.new_zeros(mpad, pad * 32)], 1).view(mpad, nseg, SEG, 32)
    ea = torch.cat([ea, ea.new_zeros(mpad, pad)], 1).view(mpad, nseg, SEG)
    wv = torch.cat([wv, wv.new_zeros(n, pad * 32)], 1).view(n, nseg, SEG, 32)
    valid = (torch.arange(nseg * SEG) < nblk).view(nseg, SEG)

    # A: a row's segment folds when its nonzero blocks' exponents differ by <= 3 (or it holds NaN)
    nz = (av != 0).any(-1)
    nan = ea == 255
    live = nz & ~nan
    emin = torch.where(live, ea, torch.full_like(ea, 1000)).amin(-1)
    emax = torch.where(live, ea, torch.full_like(ea, -1000)).amax(-1)
    anynan = nan.any(-1)
    allzero = emin == 1000
    folds = anynan | allzero | (emax - emin <= 3)
    fm = torch.where(anynan, torch.full(emin.shape, float("nan"), dtype=torch.float64),
                     torch.where(allzero, torch.zeros(emin.shape, dtype=torch.float64), _half_scale(emin)))
    shift = torch.where((folds & ~anynan)[..., None] & live, ea - emin[..., None], torch.zeros_like(ea))
    av = av << shift[..., None]
    blk = torch.where(folds[..., None], fm[..., None].expand_as(ea.double()), _half_scale(ea))
    tile_flag = folds.view(mpad // tn, tn, nseg).all(1)  # [tiles, nseg]

    # W: a 64-row group's segment folds when every row's exponents differ by <= 3, none is NaN and
    # the smallest is <= 232 (blocks past K do not count)
    ewp = torch.cat([ew, ew.new_zeros(n, pad)], 1).view(n, nseg, SEG)
    wmin = torch.where(valid, ewp, torch.full_like(ewp, 1000)).amin(-1)
    wmax = torch.where(valid, ewp, torch.full_like(ewp, -1000)).amax(-1)
    w_ok = ~((ewp == 255) & valid).any(-1) & (wmax - wmin <= 3) & (wmin <= 232)
    ng = -(-n // 64)
    w_ok = torch.cat([w_ok, w_ok.new_ones(ng * 64 - n, nseg)]).view(ng, 64, nseg).all(1)  # [groups, nseg]

    acc = torch.zeros(mpad, n, dtype=torch.float32)
    acc64 = torch.zeros(mpad, n, dtype=torch.float64)
    run = torch.zeros(mpad, n, dtype=torch.int64)
    tile_of = torch.arange(mpad) // tn
    group_of = torch.arange(n) // 64

    def add(term: torch.Tensor, weight: int, where: torch.Tensor):
        nonlocal acc, acc64, run
        full = where & (run + weight > RUN_LIMIT)
        acc64 = torch.where(full, acc64 + acc.double(), acc64)
        acc = torch.where(full, torch.zeros_like(acc), acc)
        run = torch.where(full, torch.zeros_like(run), run)
        acc = torch.where(where, _fma32(term, acc), acc)
        run = torch.where(where, run + weight, run)

    for s in range(nseg):
        nb = int(valid[s].sum())
        fast = (tile_flag[tile_of, s][:, None] & w_ok[group_of, s][None, :]) & (nb == SEG)
        if stats is not None:
            stats["fast"] = stats.get("fast", 0) + int(fast[:m].sum())
            stats["slow"] = stats.get("slow", 0) + int((~fast[:m]).sum())
        if fast.any():
            b0 = ewp[:, s].amin(-1)
            ws = wv[:, s] << (ewp[:, s] - b0[:, None])[..., None]
            i = av[:, s].reshape(mpad, -1) @ ws.reshape(n, -1).T  # exact int64 segment sums
            term = i.double() * _half_scale(b0)[None, :] * fm[:, s][:, None]
            add(term, SEG, fast)
        for b in range(nb):
            d = av[:, s, b] @ wv[:, s, b].T
            sw = _half_scale(ewp[:, s, b]).float()
            scale = (sw[None, :] * blk[:, s, b].float()[:, None]).double()  # float32 product, as the kernel
            add(d.double() * scale, 4, ~fast)
    out = acc64 + acc.double()
    return round_to_bf16(out[:m])
