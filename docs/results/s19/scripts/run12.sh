set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168 128,3072,1536,64,64,1,4,3,8,int8_meet 64,2880,2880,64,64,1,4,4,8,int8_meet"
timeout 150 python3 tools/knob_ab.py MEET_W_PF 0 2 $S > $OUT/wpf2-run12.txt 2>&1; echo "ab2 rc=$?"
timeout 150 python3 tools/knob_ab.py MEET_W_PF 0 3 $S > $OUT/wpf3-run12.txt 2>&1; echo "ab3 rc=$?"
timeout 150 python3 tools/knob_ab.py MEET_W_PF 0 1 $S > $OUT/wpf1-run12.txt 2>&1; echo "ab1 rc=$?"
timeout 60 python3 tools/timeline.py MEET_W_PF=2 256,3072,1536 > $OUT/tl-wpf2-run12.txt 2>&1; echo "tl rc=$?"
for f in wpf2 wpf3 wpf1; do echo "== $f"; grep -v "^held" $OUT/$f-run12.txt | cut -c1-130 | tail -9; done
grep -E "^[0-9]+x| arrived| met | items start| step 1 | step 6 | end " $OUT/tl-wpf2-run12.txt | cut -c1-150
