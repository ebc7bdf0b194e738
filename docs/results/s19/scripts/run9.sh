set -u
export PYTHONPATH=$PWD/src
timeout 90 python3 tools/timeline.py 256,3072,1536 > $OUT/tl-meet-run9.txt 2>&1; echo "tl 256 rc=$?"
timeout 90 python3 tools/timeline.py --config 64,64,1,4,3,8,int8_meet 128,3072,1536 > $OUT/tl-meet128-run9.txt 2>&1; echo "tl 128 rc=$?"
timeout 90 python3 tools/timeline.py --config 64,64,1,4,3,8,int8_meet 64,3072,1536 > $OUT/tl-meet64-run9.txt 2>&1; echo "tl 64 rc=$?"
for f in $OUT/tl-meet-run9.txt $OUT/tl-meet128-run9.txt $OUT/tl-meet64-run9.txt; do grep -E "^[0-9]+x| met | items start| step [0-9] | end " $f | cut -c1-150; done
