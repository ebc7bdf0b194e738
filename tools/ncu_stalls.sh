#!/usr/bin/env bash
# ncu stall reasons (per issued instruction) of int8_fused configs, on the device: bash tools/ncu_stalls.sh
# Each `run` line: M N K and the KernelConfig fields (see tools/profile_one.py); prints one line per config.
export PYTHONPATH=$PWD/src
M="gpu__time_duration.sum,sm__cycles_elapsed.max,launch__registers_per_thread,smsp__inst_executed.sum,smsp__cycles_active.avg,smsp__average_warp_latency_per_inst_issued.ratio"
for s in long_scoreboard short_scoreboard barrier wait math_pipe_throttle mio_throttle lg_throttle not_selected selected dispatch_stall membar no_instruction branch_resolving drain imc_miss; do M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"; done
run() { ncu --metrics $M -k regex:a4w4_fused --launch-skip 2 --launch-count 1 python3 tools/profile_one.py "$@" 2>&1 | grep -E "^ +(gpu__|sm__|launch__|smsp__)|^[0-9]" | sed -e 's/smsp__average_warps_issue_stalled_//' -e 's/_per_issue_active.ratio//' | awk '{print $1, $NF}' | tr '\n' ';'; echo; }
run 4 2880 512 int8_fused 16 32 1 4 1 16
run 32 2880 512 int8_fused 16 64 1 8 1 16
run 16 2112 7168 int8_fused 16 128 6 8 3 8
