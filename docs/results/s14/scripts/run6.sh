set -u
export PYTHONPATH=$PWD/src
timeout 80 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b6 --no-progress --no-plot --budget 0.3 > $OUT/bench-run6.log 2>&1; echo "bench rc=$?"
timeout 110 python3 -m mxfp4 bench --shapes 1,2112,7168 1,24576,1536 1,7168,2048 1,4608,7168 1,7168,2304 1,5120,2880 1,2880,4096 1,5760,2880 1,2880,2880 8,2112,7168 8,24576,1536 8,4608,7168 8,7168,2304 8,2880,4096 8,2880,2880 8,5120,2880 8,7168,2048 8,5760,2880 8,3072,1536 1,3072,1536 --providers mxfp4 cublas_bf16 --out /tmp/d6 --no-progress --no-plot --budget 0.3 > $OUT/bench-decode-run6.log 2>&1; echo "decode rc=$?"
timeout 120 python3 -m pytest -v -m gpu tests/test_kernel.py tests/test_nn.py -k "task_shapes or odd_shapes or nn" > $OUT/tests-gpu-run6.log 2>&1; echo "tests kernel/nn rc=$?"
grep -c PASSED $OUT/tests-gpu-run6.log; grep -c FAILED $OUT/tests-gpu-run6.log; tail -n 1 $OUT/tests-gpu-run6.log | cut -c1-200
timeout 150 python3 -m pytest -v -m gpu tests/test_int8.py -k "not fused_on_gpu" > $OUT/tests-int8-run6.log 2>&1; echo "tests int8 rc=$?"
grep -c PASSED $OUT/tests-int8-run6.log; grep -c FAILED $OUT/tests-int8-run6.log; tail -n 1 $OUT/tests-int8-run6.log | cut -c1-200
grep -A3 "geometric" $OUT/bench-run6.log; grep -E "^[0-9]+x" $OUT/bench-run6.log | awk '{print $1,$2,$3}' | paste - - -
grep -E "^[0-9]+x" $OUT/bench-decode-run6.log | awk '{print $1,$2,$3}' | paste - - ; grep -A3 "geometric" $OUT/bench-decode-run6.log
