set -u
export PYTHONPATH=$PWD/src
timeout 150 python3 tools/timeline.py --warm-sets none,wf,wq,a 256,3072,1536 > $OUT/tl-warm-run11.txt 2>&1; echo "tl warm rc=$?"
timeout 150 python3 tools/timeline.py --int8 --warm-sets none,wf 256,3072,1536 > $OUT/tl-warm-int8-run11.txt 2>&1; echo "tl warm int8 rc=$?"
grep -E "^[0-9]+x| items start| step 1 | step 6 | mul waited| end " $OUT/tl-warm-run11.txt $OUT/tl-warm-int8-run11.txt | cut -c1-190 | sed 's|/root/out/||'
