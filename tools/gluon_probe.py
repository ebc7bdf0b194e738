"""Experiment (GPU, eighth session): the int8 GEMM launch written in Gluon, two ways
(tools/gluon_gemm_probe_kernel.py): the weight's packed codes as wgmma's register operand
(RS_VARIANTS), and with PROBE_SS=1 also both operands from shared memory with the wgmma kept in
flight across K steps (VARIANTS). Each is timed against the shipped call and the shipped Triton
int8 GEMM launch on the same folded A (cold L2, beside cuBLAS bf16); outputs must be bitwise
equal to the Triton kernel's, which is checked against the exact oracle first. Only the
all-folded path (randn data always folds; the probe asserts it). Results: NOTES.md, "Eighth
session"; docs/results/s8/gluon-probe-run*.txt.

Usage (GPU box, repo root): [PROBE_SS=1] PYTHONPATH=src python3 tools/gluon_probe.py M,N,K ...
"""
import dataclasses
import os
import sys

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, "tools")
from gluon_gemm_probe_kernel import g_int8_gemm, g_rs_gemm  # noqa: E402

from mxfp4 import KernelConfig, Layout, launch, ops, quantize, testing  # noqa: E402
from mxfp4.bench.timing import ColdTimer  # noqa: E402
from gluon_rs import rs_fold, shift_plane  # noqa: E402
from mxfp4.fold import folded_weight  # noqa: E402

VARIANTS = [  # (BM, BN, BK, stages, warps)
    (64, 64, 256, 4, 4), (64, 128, 256, 4, 4), (64, 128, 128, 6, 4), (128, 128, 128, 5, 8),
    (128, 256, 128, 4, 8)]

RS_VARIANTS = {  # (BA, BNW, BK, stages, warps, split) by M
    4: [(16, 64, 256, 4, 4, 1), (16, 64, 256, 4, 4, 2), (16, 128, 256, 4, 8, 1), (16, 64, 128, 4, 4, 1)],
    16: [(16, 64, 256, 4, 4, 4), (16, 64, 256, 4, 4, 8), (16, 128, 256, 4, 8, 4), (16, 128, 256, 4, 8, 8),
         (16, 64, 128, 6, 4, 8), (16, 128, 128, 6, 8, 8)],
    32: [(32, 64, 256, 4, 4, 1), (32, 64, 256, 4, 4, 2), (32, 128, 256, 4, 8, 1), (16, 64, 256, 4, 4, 1)],
    64: [(64, 64, 256, 4, 4, 1), (64, 128, 256, 4, 8, 1), (64, 64, 256, 4, 4, 2), (64, 64, 512, 3, 4, 1)],
    256: [(64, 64, 256, 4, 4, 1), (128, 64, 256, 4, 4, 1), (128, 128, 256, 4, 8, 1)],
}


def rs_pack(w, k):
    """The weight's packed fold (one segment) in fragment order, and its block shifts."""
    codes, shift, _ = rs_fold(w, k // 32)
    return codes, shift.contiguous()


def rs_gemm(fa, rs, fw, out, ba, bnw, bk, stages, warps, split, scratch):
    m, k = fa.q.shape
    codes, plane = rs
    n = codes.shape[0]
    sh_desc = TensorDescriptor.from_tensor(plane, [bnw, 16], gl.NVMMASharedLayout.get_default_for([bnw, 16], gl.uint8))
    a_desc = TensorDescriptor.from_tensor(fa.q, [ba, bk], gl.NVMMASharedLayout.get_default_for([ba, bk], gl.int8))
    w_desc = TensorDescriptor.from_tensor(codes, [bnw, bk // 2],
                                          gl.NVMMASharedLayout.get_default_for([bnw, bk // 2], gl.uint8))
    tiles = triton.cdiv(m, ba) * triton.cdiv(n, bnw)
    part, cnt = scratch
    g_rs_gemm[(tiles * split,)](a_desc, w_desc, sh_desc, fa.seg_scale, fw.seg_scale, out, out.stride(0), m, n, k,
                                part, cnt, STAGES=stages, SPLIT=split, num_warps=warps)


def gluon_gemm(fa, fw, out, bm, bn, bk, stages, warps):
    m, k = fa.q.shape
    n = fw.q.shape[0]
    a_desc = TensorDescriptor.from_tensor(fa.q, [bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], gl.int8))
    w_desc = TensorDescriptor.from_tensor(fw.q, [bn, bk], gl.NVMMASharedLayout.get_default_for([bn, bk], gl.int8))
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    g_int8_gemm[grid](a_desc, w_desc, fa.seg_scale, fw.seg_scale, out, out.stride(0), m, n, k,
                      STAGES=stages, GROUP_M=8, num_warps=warps)


def main(argv):
    timer = ColdTimer("cuda")
    t = lambda fn: timer.time(fn, min_runs=5, max_runs=30, budget_s=0.4).mean_us  # noqa: E731
    for spec in argv:
        m, n, k = map(int, spec.split(","))
        if m < 64:  # the int8 GEMM has no small-M tiles: 64x64 (TMA reads zeros past M)
            cfg = KernelConfig(64, 64, 1, 4, 4, 8, kernel="int8")
        else:
            cfg = dataclasses.replace(ops.resolve_config(m, n, k, torch.device("cuda")), kernel="int8", split_k=1,
                                      fold_blocks=0)
        g = torch.Generator().manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
        b = torch.randn(n, k, generator=g).to(torch.bfloat16).cuda()
        w = quantize(b).to_layout(Layout.AITER_SHUFFLED)
        seg = k // 32
        fa = launch.fold_a(a, seg, w.scale_rule)
        fw = folded_weight(w, seg)
        assert bool(fa.folded.all()) and bool(fw.folded.all()), "probe needs data that folds"
        ref = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        real_fold = launch.fold_a
        launch.fold_a = lambda *args: fa
        try:
            launch.launch_int8(a, w, ref, cfg)
            tri = t(lambda: launch.launch_int8(a, w, ref, cfg))
        finally:
            launch.fold_a = real_fold
        ok = testing.check_gemm(ref, a, w, testing.sample_rows(m)).passed
        cub = t(lambda: a @ b.T)
        tile = f"{cfg.block_m}x{cfg.block_n} bk{32 * cfg.blocks_per_step} st{cfg.num_stages} w{cfg.num_warps}"
        table = ops.resolve_config(m, n, k, torch.device("cuda"))
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        shipped = t(lambda: ops.gemm_a4w4(a, w, out=out)) if hasattr(ops, "gemm_a4w4") else float("nan")
        print(f"{m}x{n}x{k}: shipped call ({table.kernel}) {shipped:.1f} us")
        print(f"{m}x{n}x{k}: triton int8 gemm {tile} {tri:.1f} us (exact {ok}), cublas bf16 {cub:.1f} us", flush=True)
        codes, shift = rs_pack(w, k)
        scratch = (torch.zeros(4 << 20, dtype=torch.int32, device="cuda"),
                   torch.zeros(1 << 16, dtype=torch.int32, device="cuda"))
        for ba, bnw, bk, stages, warps, split in RS_VARIANTS[min(RS_VARIANTS, key=lambda x: (abs(x - m), x))]:
            name = f"rs {ba}x{bnw} bk{bk} st{stages} w{warps} split{split}"
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            rs = (codes, shift_plane(shift, bk // 32))
            try:
                rs_gemm(fa, rs, fw, out, ba, bnw, bk, stages, warps, split, scratch)
            except Exception as e:  # noqa: BLE001 (an experiment: report and go on)
                print(f"  {name}: failed {type(e).__name__}: {str(e)[:300]}")
                continue
            same = bool(torch.equal(out, ref))
            us = t(lambda: rs_gemm(fa, rs, fw, out, ba, bnw, bk, stages, warps, split, scratch))
            same2 = bool(torch.equal(out, ref))
            print(f"  {name}: {us:.1f} us, bitwise equal {same} (after timing {same2})", flush=True)
        if m < 64 or not os.environ.get("PROBE_SS"):  # the SS variants (device run 1) on request
            continue
        for bm, bn, bk, stages, warps in VARIANTS:
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            try:
                gluon_gemm(fa, fw, out, bm, bn, bk, stages, warps)
            except Exception as e:  # noqa: BLE001 (an experiment: report and go on)
                print(f"  gluon {bm}x{bn} bk{bk} st{stages} w{warps}: failed {type(e).__name__}: {str(e)[:200]}")
                continue
            same = bool(torch.equal(out, ref))
            us = t(lambda: gluon_gemm(fa, fw, out, bm, bn, bk, stages, warps))
            print(f"  gluon {bm}x{bn} bk{bk} st{stages} w{warps}: {us:.1f} us, bitwise equal {same}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
