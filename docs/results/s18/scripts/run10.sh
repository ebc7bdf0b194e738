set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168 64,3072,1536 128,3072,1536 384,3072,1536 512,3072,1536 128,2880,2880 192,2880,2880 256,7168,2048 128,2112,7168 128,2880,512 512,2880,512 1024,4096,512 64,2112,7168"
timeout 200 python3 tools/knob_ab.py INT8_TMAP_PF 0 1 $S > $OUT/tmap-run10.txt 2>&1; echo "ab rc=$?"
timeout 100 python3 tools/timeline.py 256,3072,1536 INT8_TMAP_PF=1 > $OUT/tl-tmap-run10.txt 2>&1; echo "tl rc=$?"
grep -v "^held" $OUT/tmap-run10.txt | cut -c1-112
grep -E "^[0-9]+x| fold done| met | step | end " $OUT/tl-tmap-run10.txt | cut -c1-150
