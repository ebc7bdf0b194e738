#!/usr/bin/env bash
# One build-check-time cycle on the GPU machine (run from the repo root by the device tool):
#   [BENCH=shape-set|none] tools/h200_cycle.sh ["mxfp4 tune arguments" | none] [pytest -k expression]
# Tunes the shape set into the shipped table, benchmarks the task shapes, runs the selected kernel tests;
# everything it writes that is worth keeping goes to $OUT (tune.log, trials.csv, h200.json,
# tests.log, bench/).
set -u
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TUNE=${1:---shapes-set bench}; SEL=${2:-}
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
if [ "$TUNE" != none ]; then
  python3 -m mxfp4 tune $TUNE --out src/mxfp4/configs/h200.json --trials "$OUT/trials.csv" \
    --no-progress --jobs 14 > "$OUT/tune.log" 2>&1; echo "tune rc=$?"; cp src/mxfp4/configs/h200.json "$OUT/"
  tail -n 12 "$OUT/tune.log"
fi
if [ "${BENCH:-bench}" != none ]; then
  python3 -m mxfp4 bench --shapes-set "${BENCH:-bench}" --out "$OUT/bench" --no-progress > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"; tail -n 14 "$OUT/bench.log"
fi
if [ -n "$SEL" ]; then
  python3 -m pytest -q tests/test_kernel.py -k "$SEL" > "$OUT/tests.log" 2>&1; echo "tests rc=$?"
  tail -n 3 "$OUT/tests.log"
fi
