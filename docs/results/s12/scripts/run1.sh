set -u
export PYTHONPATH=$PWD/src
cd tools
timeout 200 python3 warm_probe.py 4,2880,512 16,2112,7168 32,4096,512 32,2880,512 64,7168,2048 256,3072,1536 \
  100,2880,512 8,3072,1536 1024,2880,512 > $OUT/warm-run1.txt 2>&1; echo "warm rc=$?"
timeout 200 python3 knob_ab.py PREFETCH_TENSORMAPS 0 1 64,7168,2048 256,3072,1536 100,2880,512 333,2880,512 \
  128,3072,1536 1024,2880,512 > $OUT/tmaps-run1.txt 2>&1; echo "knob rc=$?"
cat $OUT/warm-run1.txt | cut -c1-190
tail -n 30 $OUT/tmaps-run1.txt | cut -c1-190
