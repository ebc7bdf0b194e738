set -u
export PYTHONPATH=$PWD/src
timeout 80 python3 tools/timeline.py 64,7168,2048 > $OUT/tl-meet-review-run12.txt 2>&1; echo "tl meet rc=$?"
timeout 80 python3 tools/timeline.py 128,3072,1536 > $OUT/tl-int8-review-run12.txt 2>&1; echo "tl int8 rc=$?"
timeout 90 python3 -m pytest -q -m gpu tests/test_pdl.py tests/test_table_gpu.py -k "pdl or 3072x1536 or 7168x2048" -p no:cacheprovider > $OUT/gpu-review-run12.txt 2>&1; echo "tests rc=$?"
tail -n 1 $OUT/gpu-review-run12.txt
grep -E "^[0-9]+x| met | step 1 | mul waited| end | mul end" $OUT/tl-meet-review-run12.txt $OUT/tl-int8-review-run12.txt | cut -c1-170
