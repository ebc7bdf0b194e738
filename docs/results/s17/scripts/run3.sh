set -u
export PYTHONPATH=$PWD/src
cd tools && timeout 130 python3 warm_probe.py 4,2880,512 32,4096,512 64,7168,2048 256,3072,1536 512,2880,512 > $OUT/warm-twin-run3.txt 2>&1; echo "warm rc=$?"; cd ..
cat $OUT/warm-twin-run3.txt
