set -u
export PYTHONPATH=$PWD/src
cd tools
T() { timeout 150 python3 timeline.py "$@" 2>&1 | grep -v Warning; }
T --int8 256,3072,1536 512,2880,512 64,3072,1536 1024,3072,1536 64,7168,2048 > $OUT/tl-steps-run3.txt; echo "cold rc=$?"
T --int8 --warm 256,3072,1536 512,2880,512 64,3072,1536 > $OUT/tl-steps-warm-run3.txt; echo "warm rc=$?"
cat $OUT/tl-steps-run3.txt $OUT/tl-steps-warm-run3.txt
