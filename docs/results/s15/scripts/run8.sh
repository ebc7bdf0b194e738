set -u
export PYTHONPATH=$PWD/src
timeout 250 python3 tools/config_ab.py '256,3072,1536;table;64,64,1,8,3,8,int8_meet;64,128,1,8,3,8,int8_meet;64,64,1,4,3,8,int8' '64,7168,2048;table;64,64,1,8,4,8,int8_meet;64,128,1,8,4,8,int8_meet;64,64,1,4,4,8,int8' > $OUT/meet-warps-run8.txt 2>&1; echo "config_ab rc=$?"
grep -E "cuBLAS|\[|geomean" $OUT/meet-warps-run8.txt | cut -c1-130
