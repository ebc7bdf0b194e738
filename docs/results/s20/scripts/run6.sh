set -u
export PYTHONPATH=$PWD/src
C="table;16,32,2,4,4,8,int8_meet;16,32,4,4,4,8,int8_meet;16,32,4,4,3,8,int8_meet;16,64,4,4,4,8,int8_meet;16,32,7,4,4,8,int8_meet;16,32,4,4,4,8,int8"
timeout 300 python3 tools/config_ab.py MEET_PER_SM=4 "16,2112,7168;$C" "8,2112,7168;$C" "8,4608,7168;$C" "1,7168,2048;$C" > $OUT/cfg-meet-small-run6.txt 2>&1; echo "ab rc=$?"
grep -E "cuBLAS|^  \[|geomean" $OUT/cfg-meet-small-run6.txt | cut -c1-120
