set -u
export PYTHONPATH=$PWD/src
cd tools
T() { timeout 120 python3 timeline.py "$@" 2>&1 | grep -v Warning; }
T --int8 256,3072,1536 64,7168,2048 512,2880,512 384,3072,1536 64,3072,1536 128,4096,512 1024,3072,1536 > $OUT/tl-int8-pdl2-run1.txt; echo "pdl2 rc=$?"
T 256,3072,1536 > $OUT/tl-meet-run1.txt; echo "meet rc=$?"
T --int8 --pdl 1 256,3072,1536 512,2880,512 1024,3072,1536 > $OUT/tl-int8-pdl1-run1.txt; echo "pdl1 rc=$?"
T --int8 --pdl 0 256,3072,1536 512,2880,512 > $OUT/tl-int8-pdl0-run1.txt; echo "pdl0 rc=$?"
cat $OUT/tl-*-run1.txt
