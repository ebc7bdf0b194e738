set -u
export PYTHONPATH=$PWD/src
timeout 60 python3 tools/knob_ab.py INT8_W_PF_SPLIT 0 1 64,2112,7168 192,2112,7168 > $OUT/wpf-split-run9.txt 2>&1; echo "ab rc=$?"
timeout 60 python3 tools/knob_ab.py INT8_W_PF_PROGS 0 64 64,2112,7168 192,2112,7168 128,7168,2048 512,2880,512 > $OUT/wpf-ctl-run9.txt 2>&1; echo "ctl rc=$?"
timeout 60 python3 tools/timeline.py --warm-sets none 64,2112,7168 INT8_W_PF_SPLIT=1 > $OUT/tl-split-run9.txt 2>&1; echo "tl rc=$?"
grep -v "^held" $OUT/wpf-split-run9.txt | cut -c1-110; grep -v "^held" $OUT/wpf-ctl-run9.txt | cut -c1-110
grep -E "^[0-9]+x|fold done|waited|step 1 |loop done|mul end" $OUT/tl-split-run9.txt
