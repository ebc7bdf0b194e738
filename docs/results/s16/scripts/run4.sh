set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 64,7168,2048 512,2880,512 384,3072,1536 64,3072,1536 128,4096,512 192,4096,512 1024,3072,1536 64,2880,2880 128,2112,7168 256,2880,512 1024,4096,512 256,7168,2048 128,3072,1536"
timeout 300 python3 tools/knob_ab.py INT8_W_LDG 0 1 $S > $OUT/wldg-ab-run4.txt 2>&1; echo "ab rc=$?"
cd tools
timeout 100 python3 timeline.py --int8 INT8_W_LDG=1 256,3072,1536 64,3072,1536 512,2880,512 2>&1 | grep -v Warning > $OUT/tl-wldg-run4.txt; echo "tl rc=$?"
cat $OUT/tl-wldg-run4.txt $OUT/wldg-ab-run4.txt | grep -v Warning
