set -u
export PYTHONPATH=$PWD/src
timeout 90 python3 tools/timeline.py 256,3072,1536 > $OUT/tl-meet-run8.txt 2>&1; echo "tl meet rc=$?"
timeout 90 python3 tools/timeline.py 64,7168,2048 > $OUT/tl-meet64-run8.txt 2>&1; echo "tl meet64 rc=$?"
cat $OUT/tl-meet-run8.txt | cut -c1-150 | head -20
grep -E "^[0-9]+x| fold done| meet entry| arrived| met | items start| step 1 |exact" $OUT/tl-meet64-run8.txt | cut -c1-150
