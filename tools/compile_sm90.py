"""Compile a kernel for sm_90 on a machine with no GPU and write ttgir / ptx / cubin to /tmp.

Usage:
  python tools/compile_sm90.py BM BN WARPS [BLOCKS_PER_STEP]          persistent kernel
  python tools/compile_sm90.py --direct BM BN NB WARPS [BMQ]           direct kernel
  python tools/compile_sm90.py --int8 BM BN BK WARPS STAGES [MODE [PACKED]]  int8 kernel (MODE 0/1/2)
  python tools/compile_sm90.py --meet BM BN BK WARPS STAGES [MODE [PACKED]]  one-launch persistent int8 kernel
  python tools/compile_sm90.py --fused BM BMQ BN BK WARPS STAGES [SPLIT [PACKED [REST]]]  one-launch int8
                                                  kernel (STAGES 1: one K step; REST: its fold-facts load;
                                                  environment W_TMA=1: the weight by TMA; GRID3=0: one grid axis;
                                                  ONE_STEP=1: one K step at any STAGES; ALL=COLS: the
                                                  segment loop with the facts from one load of COLS;
                                                  REDUCERS=P: P programs share a split-K tile's sum;
                                                  for --int8, PDL=1: the programmatic-dependent variant)
then  .venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump --dump-sass /tmp/<name>.cubin
Integer arguments are declared divisible by 16 and strides of 1 constant, as the real launch
specializes them; costs no device time.
"""
import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, "src")
from mxfp4.kernels.a4w4 import a4w4_kernel  # noqa: E402
from mxfp4.kernels.direct import a4w4_direct_kernel  # noqa: E402
from mxfp4.kernels.fused import a4w4_fused_kernel  # noqa: E402
from mxfp4.kernels.int8 import a4w4_int8_kernel  # noqa: E402
from mxfp4.kernels.meet import a4w4_meet_kernel  # noqa: E402

PTRS = {"abs_ptr": "*fp32", "ass_ptr": "*fp32", "aok_ptr": "*i8", "wbs_ptr": "*fp32", "wss_ptr": "*fp32",
        "wok_ptr": "*i8", "a_ptr": "*bf16", "w_ptr": "*u8", "ws_ptr": "*u8", "c_ptr": "*bf16", "q_ptr": "*u8",
        "qs_ptr": "*fp32",
        "part_ptr": "*fp32", "sync_ptr": "*i32", "tile_cnt_ptr": "*i32"}


def compile_kernel(fn, consts, warps, stages):
    names = fn.arg_names
    # constexpr parameters left out take their defaults, as a launch that does not pass them does
    defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
    consts = dict(defaults, **consts, **{s: 1 for s in ("stride_cn", "stride_ak") if s in fn.arg_names})
    if "M_TILES" in names and fn is a4w4_kernel:
        consts["M_TILES"] = 1
    sig = {n: PTRS.get(n, "constexpr" if n in consts else "i32") for n in names}
    ptrs = {p for p in PTRS if PTRS[p].startswith("*")}
    div16 = (ptrs | {"stride_am", "stride_cm", "M", "N", "K", "SCOLS"}) & set(names)
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in div16}
    src = ASTSource(fn=fn, signature=sig, constexprs={(names.index(k),): v for k, v in consts.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))


def main(argv):
    if argv and argv[0] in ("--int8", "--meet"):
        bm, bn, bk, warps, stages = map(int, argv[1:6])
        mode = int(argv[6]) if len(argv) > 6 else 0
        packed = bool(int(argv[7])) if len(argv) > 7 else False
        fbn = min(bn, 128) if mode == 0 else bn
        wd = f"tensordesc<u8[{bn}, 32]>" if packed else f"tensordesc<i8[{bn}, {bk}]>"
        w32 = f"tensordesc<u8[{fbn}, 32]>" if packed else f"tensordesc<i8[{fbn}, 32]>"
        PTRS.update(a_desc=f"tensordesc<i8[{bm}, {bk}]>", w_desc=wd, a32_desc=f"tensordesc<i8[{bm}, 32]>",
                    w32_desc=w32, wsh_ptr="*i32" if packed else "*i8")
        consts = dict(BM=bm, BN=bn, BK=bk, FBN=fbn, GROUP_M=8, MODE=mode, PACKED=packed)
        fn, name = a4w4_int8_kernel, f"i8_{bm}_{bn}_{bk}_{warps}_{stages}_{mode}{'_p' if packed else ''}"
        if argv[0] == "--meet":
            PTRS.update(q_ptr="*i8")
            consts.update(PM=2, CB=64, ONE_CHUNK=True, FLOOR_RULE=False, INTERPRET=False)
            fn, name = a4w4_meet_kernel, "meet" + name[2:]
        else:
            consts["PDL"] = os.environ.get("PDL", "0") == "1"
            name += "_pdl" if consts["PDL"] else ""
        ck = compile_kernel(fn, consts, warps, stages)
    elif argv and argv[0] == "--fused":
        bm, bmq, bn, bk, warps, stages = map(int, argv[1:7])
        split = bool(int(argv[7])) if len(argv) > 7 else False
        packed = bool(int(argv[8])) if len(argv) > 8 else False
        rest = int(argv[9]) if len(argv) > 9 else 0
        tma = os.environ.get("W_TMA", "0") == "1" and not packed
        PTRS.update(w_ptr="*u8" if packed else "*i8", wsh_ptr="*i32" if packed else "*i8", q_ptr="*i8", bs_ptr="*fp32", ss_ptr="*fp32",
                    ok_ptr="*i8", w_desc=f"tensordesc<i8[{bn}, {bk}]>" if tma else "constexpr")
        consts = dict(BM=bm, BMQ=bmq, BN=bn, BK=bk, ONE_STEP=stages == 1 or os.environ.get("ONE_STEP") == "1", FLOOR_RULE=False, USE_SPLIT=split,
                      WRITE_FOLD=False, PACKED=packed, REST=rest, W_TMA=tma,
                      GRID3=os.environ.get("GRID3", "1") == "1", ALL=int(os.environ.get("ALL", "0")),
                      REDUCERS=int(os.environ.get("REDUCERS", "1")), **({} if tma else {"w_desc": None}))
        ck = compile_kernel(a4w4_fused_kernel, consts, warps, stages)
        name = f"f_{bm}_{bmq}_{bn}_{bk}_{warps}_{stages}_{int(split)}{'_p' if packed else ''}{f'_r{rest}' if rest else ''}"
    elif argv and argv[0] == "--direct":
        bm, bn, nb, warps = map(int, argv[1:5])
        bmq = int(argv[5]) if len(argv) > 5 else bm
        consts = dict(SHUFFLED=True, FLOOR_RULE=False, BM=bm, BN=bn, NB=nb, BMQ=bmq, USE_SPLIT=True, WRITE_Q=False,
                      INTERPRET=False)
        ck, name = compile_kernel(a4w4_direct_kernel, consts, warps, 1), f"d_{bm}_{bn}_{nb}_{warps}_{bmq}"
    else:
        bm, bn, warps = map(int, argv[0:3])
        nbs = int(argv[3]) if len(argv) > 3 else 1
        consts = dict(SHUFFLED=True, FLOOR_RULE=False, BM=bm, BN=bn, QM=16, QK=256, USE_SPLIT=True,
                      NBS=nbs, INTERPRET=False, PHASES=3)
        ck, name = compile_kernel(a4w4_kernel, consts, warps, 3), f"k_{bm}_{bn}_{warps}"
    print("shared", ck.metadata.shared, "->", f"/tmp/{name}.*")
    for ext in ("ptx", "ttgir"):
        open(f"/tmp/{name}.{ext}", "w").write(ck.asm[ext])
    open(f"/tmp/{name}.cubin", "wb").write(ck.asm["cubin"])


if __name__ == "__main__":
    main(sys.argv[1:])
