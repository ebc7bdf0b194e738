set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 tools/config_ab.py '64,7168,2048;table;64,32,1,4,4,8,int8;64,64,1,4,4,8,int8' '256,3072,1536;table;64,64,1,4,3,8,int8' > $OUT/owner-run11.txt 2>&1; echo "rc=$?"
grep -v Warning $OUT/owner-run11.txt
