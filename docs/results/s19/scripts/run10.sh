set -u
export PYTHONPATH=$PWD/src
timeout 400 python3 tools/config_ab.py MEET_PER_SM=3 \
 '256,3072,1536;table;64,64,2,4,4,4,int8_meet;64,64,2,4,3,8,int8_meet;64,64,1,4,6,4,int8_meet;64,64,2,4,3,4,int8_meet;64,64,1,4,4,4,int8_meet' \
 '64,7168,2048;table;64,32,2,4,4,4,int8_meet;64,32,2,4,4,8,int8_meet;64,64,2,4,4,4,int8_meet' \
 '128,3072,1536;table;64,64,2,4,4,4,int8_meet;64,64,2,4,4,8,int8_meet;64,64,1,4,4,8,int8_meet' \
 > $OUT/split-run10.txt 2>&1; echo "ab rc=$?"
grep -v "^held" $OUT/split-run10.txt | cut -c1-120
