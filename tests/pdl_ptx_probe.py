"""Helper of tests/test_pdl.py, run in a process of its own (the tests run the kernels under the
CPU interpreter; this compiles them): the int8 multiply and the A fold compiled for sm_90 by
tools/compile_sm90.py (no GPU needed) with each PDL setting; prints, as JSON, the PTX lines of
the grid-dependency instructions and of the memory accesses, and for the multiply and int8_meet
with the tensor-map prefetch (TMAP_PF) the 128-byte (tensor map) parameters and the parameters
the prefetch names."""
import json
import re
import sys

sys.path.insert(0, "tools")
import compile_sm90  # noqa: E402  (puts src on the path)
from mxfp4.kernels.int8 import a4w4_int8_kernel, fold_a_kernel  # noqa: E402
from mxfp4.kernels.meet import a4w4_meet_kernel  # noqa: E402

compile_sm90.PTRS.update(q_ptr="*i8", bs_ptr="*fp32", ss_ptr="*fp32", ok_ptr="*i8", wsh_ptr="*i8",
                         a_desc="tensordesc<i8[64, 256]>", w_desc="tensordesc<i8[64, 256]>",
                         a32_desc="tensordesc<i8[64, 32]>", w32_desc="tensordesc<i8[64, 32]>")


def ptx(fn, consts):
    return compile_sm90.compile_kernel(fn, consts, 4, 3).asm["ptx"]


def lines(text, *needles):
    """Line numbers of the instructions (not comments) holding any of the needles."""
    return [i for i, line in enumerate(text.splitlines())
            if not line.strip().startswith("//") and any(n in line for n in needles)]


out = {}
for pdl, pf in ((0, 0), (1, 0), (2, 0), (2, 64)):
    text = ptx(fold_a_kernel, dict(PM=2, CB=64, FLOOR_RULE=False, ONE_CHUNK=True, PDL=pdl, PF_PROGS=pf))
    out[f"fold{pdl}" + ("pf" if pf else "")] = dict(
        trigger=lines(text, "griddepcontrol.launch_dependents"), stores=lines(text, "st.global"),
        loads=lines(text, "ld.global"), prefetch=lines(text, "cp.async.bulk.prefetch.L2"))
for pdl in (False, True):
    text = ptx(a4w4_int8_kernel, dict(BM=64, BN=64, BK=256, FBN=64, GROUP_M=8, MODE=0, PACKED=False, PDL=pdl))
    out[f"mul{int(pdl)}"] = dict(wait=lines(text, "griddepcontrol.wait"),
                                 reads=lines(text, "ld.global", "cp.async", "atom.", "prefetch.tensormap"))
tmap_consts = dict(BM=64, BN=64, BK=256, FBN=64, GROUP_M=8, MODE=0, PACKED=False, TMAP_PF=True)
for key, fn, consts in (("mul_tmap", a4w4_int8_kernel, dict(tmap_consts, PDL=True)),
                        ("meet_tmap", a4w4_meet_kernel, dict(tmap_consts, PM=2, CB=64, ONE_CHUNK=True,
                                                             FLOOR_RULE=False, INTERPRET=False))):
    text = ptx(fn, consts)
    out[key] = dict(params128=re.findall(r"\.param \.align 64 \.b8 (\w+)\[128\]", text),
                    named=re.findall(r"mov\.b64 t, (\w+); cvta\.param\.u64 t, t; prefetch\.tensormap", text),
                    prefetch=lines(text, "prefetch.tensormap"), wait=lines(text, "griddepcontrol.wait"),
                    reads=lines(text, "ld.global", "cp.async", "atom."))
print(json.dumps(out))
