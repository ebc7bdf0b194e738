set -u
export PYTHONPATH=$PWD/src
timeout 400 python3 tools/config_ab.py \
 '256,3072,1536;table;64,64,1,4,3,8,int8_meet,packed;64,64,1,4,4,8,int8_meet,packed;64,128,1,4,3,8,int8_meet,packed' \
 '64,7168,2048;table;64,64,1,4,4,8,int8_meet,packed;64,32,1,4,4,8,int8_meet,packed;64,64,1,4,6,8,int8_meet,packed' \
 '128,3072,1536;table;64,64,1,4,4,8,int8,packed;64,128,1,4,4,8,int8,packed;64,64,1,4,6,8,int8,packed' \
 '384,3072,1536;table;64,128,1,4,4,4,int8,packed;64,128,1,4,4,8,int8,packed;128,128,1,8,4,8,int8,packed' \
 '512,2880,512;table;64,128,1,4,4,4,int8,packed;64,128,1,4,3,8,int8,packed;128,128,1,8,3,8,int8,packed' \
 '128,2880,2880;table;64,64,1,4,6,8,int8,packed;64,128,1,4,4,8,int8,packed;64,64,1,4,4,8,int8,packed' \
 > $OUT/packed-swap-run7.txt 2>&1; echo "ab rc=$?"
grep -v "^held" $OUT/packed-swap-run7.txt | cut -c1-120
