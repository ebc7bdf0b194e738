set -u
export PYTHONPATH=$PWD/src
timeout 90 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b7 --no-progress --no-plot --budget 0.3 > $OUT/bench-run7.log 2>&1; echo "bench rc=$?"
timeout 450 python3 -m pytest -q -m gpu tests > $OUT/tests-gpu-run7.log 2>&1; echo "tests rc=$?"
tail -n 3 $OUT/tests-gpu-run7.log
grep -A3 "geometric" $OUT/bench-run7.log; grep -E "^[0-9]+x" $OUT/bench-run7.log | awk '{print $1,$2,$3}' | paste - - -
