"""Compile the kernel for sm_90 on a machine with no GPU and write ttgir / ptx / cubin to /tmp.

Usage: python tools/compile_sm90.py BM BN WARPS [BLOCKS_PER_STEP], then
  .venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump --dump-sass /tmp/k_BM_BN_W.cubin
Integer arguments are declared divisible by 16 and strides of 1 constant, as the real launch
specializes them; costs no device time.
"""
import sys

import triton
from triton.backends.compiler import GPUTarget
sys.path.insert(0, "src")
from mxfp4.kernels.a4w4 import a4w4_kernel
from triton.compiler import ASTSource
def compile_cfg(BM, BN, warps, stages=3, QM=16, QK=256, split=True, shuffled=True, NBS=1):
    sig = {}
    names = a4w4_kernel.arg_names
    ptr_args = {"a_ptr":"*bf16","w_ptr":"*u8","ws_ptr":"*u8","c_ptr":"*bf16","q_ptr":"*u8","qs_ptr":"*fp32","part_ptr":"*fp32","sync_ptr":"*i32","tile_cnt_ptr":"*i32"}
    consts = dict(SHUFFLED=shuffled, FLOOR_RULE=False, BM=BM, BN=BN, QM=QM, QK=QK, USE_SPLIT=split, SCALE_MMA=False, NBS=NBS, INTERPRET=False, PHASES=3)
    for n in names:
        if n in ptr_args: sig[n] = ptr_args[n]
        elif n in consts: sig[n] = "constexpr"
        else: sig[n] = "i32"
    ones = {"stride_ak": 1, "stride_cn": 1, "M_TILES": 1}
    for k_, v_ in ones.items():
        sig[k_] = "constexpr"; consts[k_] = v_
    div16 = set(ptr_args) | {"stride_am", "stride_cm", "M", "N", "K", "SCOLS"}
    attrs = {(names.index(k_),): [["tt.divisibility", 16]] for k_ in div16}
    src = ASTSource(fn=a4w4_kernel, signature=sig, constexprs={(names.index(k),): v for k, v in consts.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))
if __name__ == "__main__":
    BM, BN, W = map(int, sys.argv[1:4])
    NBS = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    ck = compile_cfg(BM, BN, W, NBS=NBS)
    print("shared", ck.metadata.shared)
    open(f"/tmp/k_{BM}_{BN}_{W}.ptx","w").write(ck.asm["ptx"])
    open(f"/tmp/k_{BM}_{BN}_{W}.ttgir","w").write(ck.asm["ttgir"])
    open(f"/tmp/k_{BM}_{BN}_{W}.cubin","wb").write(ck.asm["cubin"])
