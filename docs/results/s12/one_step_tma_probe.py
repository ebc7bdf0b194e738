"""Offline probe (no GPU; twelfth session): where Triton 3.6 puts the wait of a TMA load when
the whole K step, A load, a row reduction, ALU work and the dot, sits in a loop from the
kernel's start. Run: python docs/results/s12/one_step_tma_probe.py STAGES; read /tmp/exp/k1_STAGES.ptx."""
import os
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def k1(a_ptr, w_desc, c_ptr, K, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.arange(0, 16)
    d = tl.zeros((16, BN), tl.int32)
    for k0 in range(0, K, BK):
        x = tl.load(a_ptr + rows[:, None] * K + k0 + tl.arange(0, BK)[None, :])
        m = tl.max(tl.abs(x.to(tl.float32)), axis=1)            # a row reduction, like the facts
        q = (x.to(tl.float32) * (7.0 / m[:, None])).to(tl.int8)  # ALU work, like the fold
        w = w_desc.load([0, k0])
        d = tl.dot(q, tl.trans(w), d, out_dtype=tl.int32)
    tl.store(c_ptr + rows[:, None] * BN + tl.arange(0, BN)[None, :], d)


BN, BK = 128, 512
sig = {"a_ptr": "*bf16", "w_desc": f"tensordesc<i8[{BN}, {BK}]>", "c_ptr": "*i32", "K": "i32", "BN": "constexpr", "BK": "constexpr"}
stages = int(sys.argv[1])
src = ASTSource(fn=k1, signature=sig, constexprs={(4,): BN, (5,): BK}, attrs={(0,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]], (3,): [["tt.divisibility", 16]]})
os.makedirs("/tmp/exp", exist_ok=True)
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_stages=stages))
open(f"/tmp/exp/k1_{stages}.ptx", "w").write(ck.asm["ptx"])
open(f"/tmp/exp/k1_{stages}.ttgir", "w").write(ck.asm["ttgir"])
print("ok", ck.metadata.shared)
