set -u
export PYTHONPATH=$PWD/src
S="128,4096,512 128,2880,512 192,4096,512 256,2880,512 512,2880,512 1024,4096,512 64,3072,1536 128,3072,1536 384,3072,1536 512,3072,1536 128,2880,2880 192,2880,2880 256,7168,2048 128,2112,7168"
timeout 150 python3 tools/knob_ab.py INT8_W_PF_PROGS 0 64 $S INT8_W_PF_BYTES=512 > $OUT/wpf512-ab-run5.txt 2>&1; echo "ab512 rc=$?"
timeout 150 python3 tools/knob_ab.py INT8_W_PF_PROGS 0 64 $S INT8_W_PF_BYTES=65536 > $OUT/wpfall-ab-run5.txt 2>&1; echo "aball rc=$?"
timeout 100 python3 tools/timeline.py --int8 256,3072,1536 64,3072,1536 512,2880,512 INT8_W_PF_PROGS=64 INT8_W_PF_BYTES=512 > $OUT/tl-wpf-run5.txt 2>&1; echo "tl rc=$?"
grep -E "^[0-9]+x|fold done|waited|step 1 |loop done|mul end" $OUT/tl-wpf-run5.txt
grep -v "^held" $OUT/wpf512-ab-run5.txt; grep -v "^held" $OUT/wpfall-ab-run5.txt
