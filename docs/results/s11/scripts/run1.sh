set -u
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
M=int8_meet
timeout 540 python3 tools/config_ab.py \
 "256,3072,1536;table;128,64,1,8,3,8,$M;128,64,1,4,3,8,$M;128,64,1,8,4,4,$M;128,128,1,8,3,8,$M;128,64,1,8,3,8,int8" \
 "16,2112,7168;table;16,128,14,8,3,4,int8_fused;16,128,14,8,3,8,int8_fused;16,256,14,8,3,4,int8_fused;16,64,7,8,3,8,int8_fused" \
 "256,4096,512;table;128,64,1,8,3,8,$M;128,64,1,8,2,8,$M" \
 "384,4096,512;table;128,64,1,8,3,8,$M;64,64,1,4,3,8,$M" \
 "384,3072,1536;table;128,64,1,8,3,8,$M;64,64,1,4,3,8,$M" \
 "256,2880,2880;table;128,64,1,8,3,8,$M;64,64,1,4,3,8,$M" \
 > $OUT/configs-run1.txt 2>&1; echo "rc=$?"
cat $OUT/configs-run1.txt | grep -v Warning | cut -c1-160
