set -u
export PYTHONPATH=$PWD/src
(cd tools && timeout 150 python3 timeline.py > $OUT/timeline-run1.txt 2>&1; echo "timeline rc=$?")
grep -E "^[0-9]+x|slot|^ +[0-9]+ |span" $OUT/timeline-run1.txt | cut -c1-150
timeout 300 python3 -m pytest -v -m gpu tests/test_int8.py -k "fused_on_gpu" > $OUT/tests-fused-run1.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-fused-run1.log; grep -c FAILED $OUT/tests-fused-run1.log; tail -n 1 $OUT/tests-fused-run1.log | cut -c1-200
