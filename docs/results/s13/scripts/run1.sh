set -u
export PYTHONPATH=$PWD/src
cd tools
F=int8_fused
timeout 400 python3 config_ab.py \
 "4,2880,512;table;16,32,1,4,2,16,$F,tma;16,64,1,4,2,16,$F,tma" \
 "32,4096,512;table;8,128,1,4,2,16,$F,tma;8,128,1,8,2,16,$F,tma" \
 "32,2880,512;table;8,128,1,8,2,16,$F,tma;8,128,1,4,2,16,$F,tma" \
 "1,3072,1536;table;16,128,3,4,2,16,$F,tma;16,128,3,8,2,16,$F,tma" \
 "8,3072,1536;table;16,128,3,8,2,16,$F,tma;16,128,3,4,2,16,$F,tma" \
 "8,5120,2880;table;16,128,6,8,2,16,$F,tma;16,128,6,4,2,16,$F,tma" \
 "8,7168,2048;table;16,128,4,8,2,16,$F,tma;16,128,4,4,2,16,$F,tma" \
 "8,4096,512;table;16,64,1,4,2,16,$F,tma;16,128,1,4,2,16,$F,tma" \
 > $OUT/loopstep-run1.txt 2>&1; echo "ab rc=$?"
cut -c1-150 $OUT/loopstep-run1.txt
