set -u
export PYTHONPATH=$PWD/src
cd tools
timeout 150 python3 timeline.py --int8 256,3072,1536 2>&1 | grep -v Warning > $OUT/tl-final-run12.txt; echo "int8 rc=$?"
timeout 100 python3 timeline.py 256,3072,1536 16,2112,7168 2>&1 | grep -v Warning >> $OUT/tl-final-run12.txt; echo "meet/fused rc=$?"
cat $OUT/tl-final-run12.txt
