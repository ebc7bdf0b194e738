set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168 64,3072,1536 128,3072,1536 384,3072,1536 512,3072,1536 128,2880,2880 192,2880,2880 256,7168,2048 128,7168,2048 128,2112,7168 512,2880,512"
timeout 150 python3 tools/knob_ab.py INT8_W_LOOP_PF 0 4 $S > $OUT/looppf4-run6.txt 2>&1; echo "pf4 rc=$?"
timeout 150 python3 tools/knob_ab.py INT8_W_LOOP_PF 0 2 $S > $OUT/looppf2-run6.txt 2>&1; echo "pf2 rc=$?"
for f in looppf4 looppf2; do grep -v "^held" $OUT/$f-run6.txt | cut -c1-112; done
