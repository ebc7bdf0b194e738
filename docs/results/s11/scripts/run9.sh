set -u
export PYTHONPATH=$PWD/src
F=int8_fused
timeout 300 python3 tools/config_ab.py "16,2112,7168;table;16,128,19,8,3,4,$F;16,128,28,8,3,4,$F;16,128,28,8,1,8,$F;16,64,14,8,3,4,$F;16,128,14,8,2,4,$F" \
  > $OUT/configs-run9.txt 2>&1; echo "ab rc=$?"
grep -v Warn $OUT/configs-run9.txt | cut -c1-150
