set -u
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 200 python3 tools/knob_ab.py INT8_W_PREFETCH 0 4096 128,4096,512 128,2880,512 192,4096,512 256,2880,512 512,2880,512 1024,4096,512 64,3072,1536 128,3072,1536 384,3072,1536 512,3072,1536 128,2880,2880 192,2880,2880 256,7168,2048 128,2112,7168 > $OUT/pf-int8-run1.txt 2>&1; echo "int8 rc=$?"
timeout 90 python3 tools/knob_ab.py MEET_W_PREFETCH 0 4096 256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168 > $OUT/pf-meet1-run1.txt 2>&1; echo "meet1 rc=$?"
timeout 90 python3 tools/knob_ab.py MEET_W_PREFETCH 0 4096 256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168 MEET_PF_AT=2 > $OUT/pf-meet2-run1.txt 2>&1; echo "meet2 rc=$?"
timeout 90 python3 tools/timeline.py --int8 256,3072,1536 512,2880,512 INT8_W_PREFETCH=4096 > $OUT/tl-pf-run1.txt 2>&1; echo "tl rc=$?"
grep -A3 "^256x3072x1536\|^512x2880x512" $OUT/tl-pf-run1.txt | grep -v "^ *[0-9]* step" | head -24
cat $OUT/pf-int8-run1.txt $OUT/pf-meet1-run1.txt $OUT/pf-meet2-run1.txt | grep -v "^held"
