set -u
export PYTHONPATH=$PWD/src
E="64,2880,2880 128,2880,2880 192,2880,2880 64,5120,2880 64,2880,4096 128,2880,4096 64,7168,2304 256,7168,2048 128,3072,1536 192,3072,1536"
timeout 120 python3 tools/knob_ab.py INT8_W_PF_DELAY 500 800 $E > $OUT/delay800-run2.txt 2>&1; echo "d800 rc=$?"
timeout 90 python3 tools/knob_ab.py INT8_W_PF_DELAY 0 500 64,24576,1536 256,24576,1536 512,24576,1536 INT8_W_PF_DELAY_N=100000 > $OUT/delayn-run2.txt 2>&1; echo "dn rc=$?"
timeout 120 python3 tools/timeline.py --warm-sets none,wq 256,3072,1536 64,7168,2048 > $OUT/tl-meet-wq-run2.txt 2>&1; echo "tl rc=$?"
for f in delay800 delayn; do grep -v "^held" $OUT/$f-run2.txt | cut -c1-104; done
grep -E "^[0-9]+x|waited|step 1 |step 2 |step 3 |loop done|fold done|met |mul end| end |plain" $OUT/tl-meet-wq-run2.txt | cut -c1-150
