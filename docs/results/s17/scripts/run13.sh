set -u
export PYTHONPATH=$PWD/src
timeout 100 python3 -m pytest -q -m gpu tests/test_pdl.py tests/test_table_gpu.py -k "pdl or 3072x1536 or 2880x512" -p no:cacheprovider > $OUT/gpu-review-run13.txt 2>&1; echo "tests rc=$?"; tail -n 1 $OUT/gpu-review-run13.txt
cd tools && timeout 40 python3 warm_probe.py 64,3072,1536 > $OUT/warm-review-run13.txt 2>&1; echo "warm rc=$?"; cd ..
timeout 60 python3 tools/timeline.py --int8 --warm-sets none,wq,wf 64,3072,1536 > $OUT/tl-review-run13.txt 2>&1; echo "tl rc=$?"
cat $OUT/warm-review-run13.txt; grep -E "^[0-9]+x|waited|step 1 " $OUT/tl-review-run13.txt
