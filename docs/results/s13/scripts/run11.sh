set -u
export PYTHONPATH=$PWD/src
(cd tools && timeout 60 python3 config_ab.py "8,2880,2880;table" "8,7168,2048;table" "1,2880,4096;table" "1,5120,2880;table" "16,2112,7168;table" > $OUT/fix-run11.txt 2>&1; echo "ab rc=$?")
cut -c1-140 $OUT/fix-run11.txt
timeout 100 python3 -m pytest -v -m gpu tests/test_int8.py -k "fused_on_gpu and 2152-2048 and (100 or 333)" > $OUT/tests-fused-run11.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-fused-run11.log; grep -c FAILED $OUT/tests-fused-run11.log; tail -n 1 $OUT/tests-fused-run11.log | cut -c1-200
