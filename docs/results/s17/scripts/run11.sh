set -u
export PYTHONPATH=$PWD/src
S="128,4096,512 128,2880,512 192,4096,512 256,2880,512 512,2880,512 1024,4096,512 64,3072,1536 128,3072,1536 384,3072,1536 512,3072,1536 128,2880,2880 192,2880,2880 256,7168,2048 128,2112,7168"
timeout 100 python3 tools/knob_ab.py INT8_W_PF_DELAY 0 500 $S > $OUT/wpf-delay500-run11.txt 2>&1; echo "d500 rc=$?"
timeout 100 python3 tools/knob_ab.py INT8_W_PF_DELAY 0 1000 $S > $OUT/wpf-delay1000-run11.txt 2>&1; echo "d1000 rc=$?"
for f in $OUT/wpf-delay500-run11.txt $OUT/wpf-delay1000-run11.txt; do grep -v "^held" $f | cut -c1-104; done
