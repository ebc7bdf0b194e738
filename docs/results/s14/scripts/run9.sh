set -u
export PYTHONPATH=$PWD/src
timeout 75 python3 -m pytest -v -m gpu tests/test_int8.py tests/test_fused_gpu.py -k "two_programs or shared_split_sum or (fused_on_gpu and 2112-7168-16)" > $OUT/tests-final-run9.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-final-run9.log; grep -c FAILED $OUT/tests-final-run9.log; tail -n 1 $OUT/tests-final-run9.log | cut -c1-200
timeout 70 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 --out /tmp/b9 --no-progress --no-plot --budget 0.2 > $OUT/bench-final-run9.log 2>&1; echo "bench rc=$?"
grep -A2 "geometric" $OUT/bench-final-run9.log; grep -E "^[0-9]+x" $OUT/bench-final-run9.log | awk '{print $1,$2,$3}' | paste - -
