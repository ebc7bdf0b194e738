set -u
export PYTHONPATH=$PWD/src
M=int8_meet
timeout 200 python3 tools/config_ab.py "64,7168,2048;table;64,64,2,4,3,8,$M;64,64,2,4,4,8,$M" \
  "128,7168,2048;table;64,64,2,4,3,8,$M;64,128,2,4,3,8,$M" "128,2880,2880;table;64,64,2,4,3,8,$M" \
  "128,3072,1536;table;64,64,2,4,3,8,$M" > $OUT/configs-run5.txt 2>&1; echo "ab rc=$?"
grep -v Warn $OUT/configs-run5.txt | cut -c1-150
timeout 300 python3 -m mxfp4 bench --shapes 7,2880,512 7,2112,7168 7,4096,512 7,7168,2048 7,3072,1536 48,2880,512 48,2112,7168 48,4096,512 48,7168,2048 48,3072,1536 100,2880,512 100,2112,7168 100,4096,512 100,7168,2048 100,3072,1536 333,2880,512 333,2112,7168 333,4096,512 333,7168,2048 333,3072,1536 640,2880,512 640,2112,7168 640,4096,512 640,7168,2048 640,3072,1536 1024,2880,512 1024,2112,7168 1024,4096,512 1024,7168,2048 1024,3072,1536 --providers mxfp4 cublas_bf16 --out $OUT/sweep --no-progress --no-plot --budget 0.3 > $OUT/bench-sweep-run5.log 2>&1; echo "sweep rc=$?"
grep -A2 "geometric" $OUT/bench-sweep-run5.log; grep -E "^[0-9]+x" $OUT/bench-sweep-run5.log | awk '{print $1,$2,$3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
