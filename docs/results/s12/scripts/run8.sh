set -u
export PYTHONPATH=$PWD/src
timeout 170 python3 -m pytest -v -m gpu tests/test_int8.py -k "fused_on_gpu and 2152-2048" > $OUT/tests-fused-run8.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-fused-run8.log; grep -c FAILED $OUT/tests-fused-run8.log; tail -n 2 $OUT/tests-fused-run8.log | cut -c1-200
