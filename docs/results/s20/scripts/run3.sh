set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168 128,3072,1536,64,64,1,4,3,8,int8_meet 192,3072,1536,64,64,1,4,3,8,int8_meet 64,2880,2880,64,64,1,4,4,8,int8_meet 512,2880,512,64,64,1,4,3,8,int8_meet"
timeout 200 python3 -m pytest -q -m gpu tests/test_meet_tiles.py -p no:cacheprovider > $OUT/gpu-meet-tiles-run1.txt 2>&1; echo "tests rc=$?"
timeout 150 python3 tools/knob_ab.py MEET_TILES 0 1 $S > $OUT/tiles-ab-run1.txt 2>&1; echo "ab rc=$?"
timeout 90 python3 tools/timeline.py MEET_TILES=1 256,3072,1536 64,7168,2048 > $OUT/tl-tiles-run1.txt 2>&1; echo "tl rc=$?"
tail -n 3 $OUT/gpu-meet-tiles-run1.txt
grep -v "^held" $OUT/tiles-ab-run1.txt | cut -c1-140 | tail -12
grep -E "^[0-9]+x| fold done| arrived| met | items start| step 1 | end " $OUT/tl-tiles-run1.txt | cut -c1-150
