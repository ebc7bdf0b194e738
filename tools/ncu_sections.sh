#!/usr/bin/env bash
# ncu's throughput, memory, warp-state and scheduler sections for one kernel of one config, on
# the device:  bash tools/ncu_sections.sh KERNEL_REGEX M N K [KERNEL BM BN SPLIT WARPS STAGES STEP]
# (the config fields as tools/profile_one.py takes them); prints ncu's details page.
export PYTHONPATH=$PWD/src
regex=$1; shift
ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section Occupancy \
    -k "regex:$regex" --launch-skip 2 --launch-count 1 python3 tools/profile_one.py "$@" 2>&1 \
  | grep -vE "^==PROF==|^ +-+ +-+|^$"
