set -u
export PYTHONPATH=$PWD/src
timeout 90 python3 tools/timeline.py 256,3072,1536 > $OUT/tl-meet-run6.txt 2>&1; echo "tl meet rc=$?"
timeout 90 python3 tools/timeline.py --int8 256,3072,1536 > $OUT/tl-int8-run6.txt 2>&1; echo "tl int8 rc=$?"
grep -E "^[0-9]+x| met | step 1 | step 2 | mul waited| end | mul end|exact|cuBLAS" $OUT/tl-meet-run6.txt $OUT/tl-int8-run6.txt | cut -c1-160
