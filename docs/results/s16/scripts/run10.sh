set -u
export PYTHONPATH=$PWD/src
timeout 300 python3 tools/config_ab.py '256,2880,512;table;64,32,1,4,4,8,int8;64,32,1,4,6,8,int8' '192,4096,512;table;64,32,1,4,4,8,int8' '256,4096,512;table;64,32,1,4,4,8,int8' '192,3072,1536;table;64,32,1,4,4,8,int8;64,64,1,4,4,8,int8' '512,2880,512;table;64,32,1,4,4,8,int8;64,64,1,4,3,8,int8' '384,4096,512;table;64,32,1,4,4,8,int8;64,64,1,4,3,8,int8' '256,3072,1536;table;64,32,1,4,4,8,int8_meet;64,32,1,4,3,8,int8_meet' '128,3072,1536;table;64,32,1,4,6,8,int8' > $OUT/configs-run10.txt 2>&1; echo "rc=$?"
grep -v Warning $OUT/configs-run10.txt
