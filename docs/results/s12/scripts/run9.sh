set -u
export PYTHONPATH=$PWD/src
timeout 150 python3 -m pytest -v -m gpu tests/test_kernel.py tests/test_nn.py -k "task_shapes or odd_shapes or nn" > $OUT/tests-gpu-run9.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-gpu-run9.log; grep -c FAILED $OUT/tests-gpu-run9.log; tail -n 2 $OUT/tests-gpu-run9.log | cut -c1-200
