set -u
export PYTHONPATH=$PWD/src
F=int8_fused
cd tools
timeout 300 python3 config_ab.py \
 "8,3072,1536;table;16,64,3,4,1,16,$F,packed;16,128,3,4,1,16,$F,packed;16,128,3,8,1,16,$F,packed" \
 "1,3072,1536;table;16,128,3,4,1,16,$F,packed;16,64,3,4,1,16,$F,packed;16,64,3,8,1,16,$F,packed" \
 "1,24576,1536;table;16,64,1,8,3,8,$F,packed;16,128,1,8,3,8,$F,packed;16,64,3,8,1,16,$F,packed" \
 "8,24576,1536;table;16,64,1,8,3,8,$F,packed;16,128,1,8,3,8,$F,packed;16,64,3,8,1,16,$F,packed" \
 "1,4608,7168;table;16,64,3,4,3,8,$F,packed;16,128,6,8,3,8,$F,packed;16,64,14,4,1,16,$F,packed" \
 "4,2880,512;table;16,32,1,4,1,16,$F,packed;16,64,1,4,1,16,$F,packed;16,64,1,8,1,16,$F,packed" \
 "16,2112,7168;table;16,128,14,8,3,4,$F,packed;16,128,14,8,1,16,$F,packed;16,64,14,4,1,16,$F,packed" \
 > $OUT/packed-run6.txt 2>&1; echo "ab rc=$?"
cut -c1-140 $OUT/packed-run6.txt
