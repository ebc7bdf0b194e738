set -u
export PYTHONPATH=$PWD/src
timeout 120 python3 docs/results/s19/scripts/fused_packed_check.py > $OUT/fused-packed-run7.txt 2>&1; echo "fused packed rc=$?"
timeout 200 compute-sanitizer --tool memcheck python3 docs/results/s19/scripts/oob_probe.py > $OUT/memcheck-run7.txt 2>&1; echo "memcheck rc=$?"
tail -n 2 $OUT/fused-packed-run7.txt
grep -E "passed|FAILED|ERROR SUMMARY|Invalid" $OUT/memcheck-run7.txt | head
