set -u
export PYTHONPATH=$PWD/src
M="256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168"
timeout 90 python3 tools/knob_ab.py MEET_POLL 0 1 $M > $OUT/poll01-run3.txt 2>&1; echo "p01 rc=$?"
timeout 90 python3 tools/knob_ab.py MEET_POLL 1 2 $M > $OUT/poll12-run3.txt 2>&1; echo "p12 rc=$?"
timeout 90 python3 tools/timeline.py --warm-sets none 256,3072,1536 64,7168,2048 MEET_POLL=1 > $OUT/tl-poll1-run3.txt 2>&1; echo "tl rc=$?"
for f in poll01 poll12; do grep -v "^held" $OUT/$f-run3.txt | cut -c1-104; done
grep -E "^[0-9]+x| fold done| met | end " $OUT/tl-poll1-run3.txt | cut -c1-150
