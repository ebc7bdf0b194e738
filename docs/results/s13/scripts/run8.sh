set -u
export PYTHONPATH=$PWD/src
cd tools
S="16,2112,7168 1,2112,7168 1,7168,2048 1,4608,7168 1,7168,2304 1,5760,2880 8,2112,7168 8,4608,7168 8,7168,2304 8,5760,2880 1,24576,1536 8,24576,1536"
timeout 300 python3 knob_ab.py FUSED_SEGMENT_LOOP 0 1 $S > $OUT/segloop-run8.txt 2>&1; echo "ab rc=$?"
cut -c1-150 $OUT/segloop-run8.txt
