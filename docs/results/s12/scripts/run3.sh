set -u
export PYTHONPATH=$PWD/src
cd tools
S="4,2880,512 32,4096,512 32,2880,512 16,2112,7168 8,3072,1536 1,3072,1536 8,5760,2880 1,2112,7168"
timeout 200 python3 knob_ab.py FUSED_GRID3 0 1 $S FUSED_W_TMA=0 > $OUT/grid3-run3.txt 2>&1; echo "grid3 rc=$?"
timeout 200 python3 knob_ab.py FUSED_W_TMA 0 1 $S FUSED_GRID3=1 > $OUT/wtma-run3.txt 2>&1; echo "wtma rc=$?"
cut -c1-170 $OUT/grid3-run3.txt $OUT/wtma-run3.txt
