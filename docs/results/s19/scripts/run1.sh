set -u
export PYTHONPATH=$PWD/src
timeout 330 python3 tools/config_ab.py \
 '256,3072,1536;table;64,64,1,4,3,8,int8_meet,packed;64,64,1,4,4,8,int8_meet,packed;64,128,1,4,3,8,int8_meet,packed;64,64,1,4,3,4,int8_meet,packed' \
 '64,7168,2048;table;64,32,1,4,4,8,int8_meet,packed;64,64,1,4,4,8,int8_meet,packed;64,64,1,4,6,8,int8_meet,packed' \
 '128,3072,1536;table;64,64,1,4,4,8,int8,packed;64,128,1,4,4,8,int8,packed;64,64,1,4,6,8,int8,packed' \
 '384,3072,1536;table;64,128,1,4,4,4,int8,packed;64,128,1,4,4,8,int8,packed;128,128,1,8,4,8,int8,packed' \
 '512,2880,512;table;64,128,1,4,4,4,int8,packed;64,128,1,4,3,8,int8,packed;128,128,1,8,3,8,int8,packed' \
 '128,2880,2880;table;64,64,1,4,6,8,int8,packed;64,128,1,4,4,8,int8,packed;64,64,1,4,4,8,int8,packed' \
 '16,2112,7168;table;16,64,4,4,4,8,int8_meet,packed;16,64,4,4,4,8,int8,packed;16,128,8,4,4,8,int8_meet,packed' \
 '32,4096,512;table;32,64,1,4,3,8,int8_meet,packed;32,64,2,4,3,4,int8_meet,packed;16,64,1,4,3,8,int8_meet,packed' \
 > $OUT/packed-run1.txt 2>&1; echo "ab rc=$?"
timeout 200 python3 -m pytest -q -m gpu tests/test_int8.py -k "odd_shapes" -p no:cacheprovider -x > $OUT/gpu-int8-run1.txt 2>&1; echo "tests int8 rc=$?"
tail -n 3 $OUT/gpu-int8-run1.txt | cut -c1-300
grep -v "^held" $OUT/packed-run1.txt | cut -c1-120
