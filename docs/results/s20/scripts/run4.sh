set -u
export PYTHONPATH=$PWD/src
C="table;64,32,1,4,4,8,int8;64,64,1,4,4,8,int8;16,32,1,4,4,8,int8;16,64,1,4,3,8,int8;64,32,1,4,4,8,int8_meet;64,64,1,4,3,8,int8_meet;16,32,1,4,4,8,int8_meet;16,64,1,4,3,8,int8_meet"
timeout 200 python3 tools/config_ab.py "16,3072,1536;$C" "8,3072,1536;$C" "1,3072,1536;$C" > $OUT/cfg-3072-run4.txt 2>&1; echo "ab rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200.json
timeout 200 python3 -m mxfp4 tune --shapes 16,3072,1536 --kernel int8_fused,int8 --out $OUT/h200.json --trials $OUT/trials-16x3072x1536-run4.csv --no-progress > $OUT/tune-run4.log 2>&1; echo "tune rc=$?"
cut -c1-150 $OUT/cfg-3072-run4.txt | tail -32
tail -5 $OUT/tune-run4.log
