set -u
export PYTHONPATH=$PWD/src
(cd tools && timeout 200 python3 timeline.py 16,2112,7168 8,3072,1536 1,3072,1536 32,4096,512 4,2880,512 8,7168,2048 > $OUT/timeline-run2.txt 2>&1; echo "timeline rc=$?")
grep -E "^[0-9]+x|^ +[0-9]+ |span|Error|error" $OUT/timeline-run2.txt | cut -c1-150
