set -u
export PYTHONPATH=$PWD/src
F=int8_fused
(cd tools && timeout 100 python3 config_ab.py "32,4096,512;table;8,128,1,4,1,16,$F;8,128,1,4,2,16,$F,tma" \
  "32,2880,512;table;8,128,1,4,2,16,$F,tma" "8,3072,1536;table;16,128,3,8,1,16,$F;16,128,3,4,2,16,$F,tma" \
  > $OUT/ab-run5.txt 2>&1; echo "ab rc=$?")
cut -c1-140 $OUT/ab-run5.txt
timeout 330 python3 -m pytest -v -m gpu tests/test_int8.py -k "fused_on_gpu" > $OUT/tests-fused-run5.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-fused-run5.log; grep -c FAILED $OUT/tests-fused-run5.log; tail -n 2 $OUT/tests-fused-run5.log | cut -c1-200
