set -u
export PYTHONPATH=$PWD/src
F=int8_fused
timeout 300 python3 tools/config_ab.py "4,2880,512;table;16,32,1,8,1,16,$F;16,64,1,8,1,16,$F" \
  "32,4096,512;table;16,64,1,16,1,16,$F;16,128,1,16,1,16,$F" "32,2880,512;table;16,64,1,16,1,16,$F;16,32,1,8,1,16,$F" \
  "1,4096,512;table;16,32,1,8,1,16,$F" "8,4096,512;table;16,32,1,8,1,16,$F;16,64,1,16,1,16,$F" \
  "16,2112,7168;table;16,128,14,16,3,4,$F" "8,3072,1536;table;16,128,3,16,1,16,$F" \
  > $OUT/configs-run8.txt 2>&1; echo "ab rc=$?"
grep -v Warn $OUT/configs-run8.txt | cut -c1-150
