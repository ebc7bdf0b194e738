set -u
export PYTHONPATH=$PWD/src
timeout 120 python3 docs/results/s19/scripts/fused_packed_check.py > $OUT/fused-packed-run2.txt 2>&1; echo "fused packed rc=$?"
timeout 400 python3 tools/config_ab.py \
 '256,3072,1536;table;128,64,1,4,3,8,int8_meet;128,64,1,4,4,4,int8_meet;128,64,1,4,3,8,int8_meet,packed;128,64,1,4,4,4,int8_meet,packed;64,64,1,4,4,4,int8_meet;64,64,1,4,6,4,int8_meet' \
 '128,3072,1536;table;128,64,1,4,4,8,int8;128,64,1,4,4,8,int8,packed;128,64,1,4,4,4,int8' \
 '384,3072,1536;table;128,64,1,4,4,8,int8;128,64,1,4,4,8,int8,packed;128,64,1,4,4,4,int8' \
 '512,2880,512;table;128,64,1,4,4,8,int8;128,64,1,4,4,8,int8,packed;128,64,1,4,3,4,int8' \
 '256,4096,512;table;128,64,1,4,4,8,int8_meet;128,64,1,4,3,8,int8_meet,packed' \
 '128,2880,2880;table;128,64,1,4,4,8,int8;128,64,1,4,4,8,int8,packed' \
 > $OUT/tiles-run2.txt 2>&1; echo "ab rc=$?"
tail -n 3 $OUT/fused-packed-run2.txt
grep -v "^held" $OUT/tiles-run2.txt | cut -c1-120
