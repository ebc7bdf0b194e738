set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 -m pytest -v -m gpu tests/test_int8.py -k "odd_shapes or two_programs" > $OUT/tests-int8-run8.log 2>&1; echo "tests int8 rc=$?"
grep -c PASSED $OUT/tests-int8-run8.log; grep -E "FAILED|ERROR" $OUT/tests-int8-run8.log | head; tail -n 1 $OUT/tests-int8-run8.log
timeout 240 python3 -m pytest -v -m gpu tests/test_pdl.py tests/test_kernel.py tests/test_nn.py > $OUT/tests-run8.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-run8.log; grep -E "FAILED|ERROR" $OUT/tests-run8.log | head; tail -n 1 $OUT/tests-run8.log
timeout 100 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench-run8 --no-progress --no-plot --budget 0.3 > $OUT/bench-run8.log 2>&1; echo "bench rc=$?"
grep -E "^ *[0-9]+x" $OUT/bench-run8.log | awk '{print $1, $2, $3}' | paste - - - ; tail -n 6 $OUT/bench-run8.log
