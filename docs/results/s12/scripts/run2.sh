set -u
export PYTHONPATH=$PWD/src
cd tools
timeout 150 python3 timeline.py 32,4096,512 4,2880,512 16,2112,7168 256,3072,1536 > $OUT/timeline-cold-run2.txt 2>&1; echo "cold rc=$?"
timeout 150 python3 timeline.py --warm 32,4096,512 4,2880,512 16,2112,7168 256,3072,1536 > $OUT/timeline-warm-run2.txt 2>&1; echo "warm rc=$?"
cat $OUT/timeline-cold-run2.txt $OUT/timeline-warm-run2.txt | cut -c1-160
