set -u
export PYTHONPATH=$PWD/src
cd tools
timeout 120 python3 timeline.py --int8 INT8_PDL=2 512,2880,512 2>&1 | grep -v Warning > $OUT/tl-review-run15.txt; echo "int8 rc=$?"
timeout 60 python3 timeline.py 64,7168,2048 2>&1 | grep -v Warning >> $OUT/tl-review-run15.txt; echo "meet rc=$?"
cat $OUT/tl-review-run15.txt
