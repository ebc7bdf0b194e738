set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 64,7168,2048 256,3072,1536,64,64,1,4,3,8,int8 64,7168,2048,64,64,1,4,4,8,int8 512,2880,512 384,3072,1536 64,3072,1536 128,4096,512 1024,3072,1536 64,2880,2880 128,2112,7168 256,7168,2048"
timeout 230 python3 tools/knob_ab.py FOLD_PREFETCH 0 4194304 $S > $OUT/pf4m-ab-run2.txt 2>&1; echo "4M rc=$?"
timeout 230 python3 tools/knob_ab.py FOLD_PREFETCH 0 67108864 $S > $OUT/pfall-ab-run2.txt 2>&1; echo "all rc=$?"
cd tools
timeout 100 python3 timeline.py --int8 FOLD_PREFETCH=67108864 256,3072,1536 512,2880,512 2>&1 | grep -v Warning > $OUT/tl-pf-run2.txt
timeout 60 python3 timeline.py FOLD_PREFETCH=67108864 256,3072,1536 2>&1 | grep -v Warning >> $OUT/tl-pf-run2.txt
cat $OUT/tl-pf-run2.txt
cat $OUT/pf4m-ab-run2.txt $OUT/pfall-ab-run2.txt | grep -v Warning
