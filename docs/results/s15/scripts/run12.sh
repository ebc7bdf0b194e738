set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 -m pytest -v -m gpu tests/test_pdl.py tests/test_fused_gpu.py tests/test_int8.py -k "pdl or shared or two_programs" > $OUT/tests-run12.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-run12.log; grep -E "FAILED|ERROR" $OUT/tests-run12.log | head; tail -n 1 $OUT/tests-run12.log
