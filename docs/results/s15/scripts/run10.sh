set -u
export PYTHONPATH=$PWD/src
C='16,64,1,4,3,8,int8;16,32,1,4,3,8,int8;16,64,2,4,3,8,int8;16,64,3,4,3,4,int8;16,128,3,4,3,4,int8'
timeout 200 python3 tools/config_ab.py "8,3072,1536;table;$C" "1,3072,1536;table;$C" > $OUT/decode-int8-run10.txt 2>&1; echo "config_ab rc=$?"
grep -E "cuBLAS|\[|geomean|Error|error" $OUT/decode-int8-run10.txt | cut -c1-130
