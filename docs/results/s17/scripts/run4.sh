set -u
export PYTHONPATH=$PWD/src
timeout 250 python3 tools/timeline.py --int8 --warm-sets none,a,wq,wf,c,a+wq+wf 256,3072,1536 64,3072,1536 > $OUT/tl-warmsets-int8-run4.txt 2>&1; echo "int8 rc=$?"
timeout 120 python3 tools/timeline.py --warm-sets none,a,wq,wf,a+wq+wf 256,3072,1536 > $OUT/tl-warmsets-meet-run4.txt 2>&1; echo "meet rc=$?"
for f in $OUT/tl-warmsets-int8-run4.txt $OUT/tl-warmsets-meet-run4.txt; do grep -E "^[0-9]+x|waited|step 1 |step 2 |loop done|fold done|met |mul end| end " $f; done
