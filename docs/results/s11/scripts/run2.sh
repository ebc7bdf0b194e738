set -u
export PYTHONPATH=$PWD/src
F=int8_fused
timeout 330 python3 -m mxfp4 tune --shapes 16,2112,7168 1,2112,7168 8,2112,7168 1,3072,1536 8,3072,1536 8,5760,2880 \
  --kernel $F --out src/mxfp4/configs/h200.json --trials $OUT/trials-run2.csv --no-progress --jobs 14 \
  > $OUT/tune-run2.log 2>&1; echo "tune rc=$?"; cp src/mxfp4/configs/h200.json $OUT/h200-run2.json
tail -n 8 $OUT/tune-run2.log | cut -c1-200
timeout 150 python3 tools/config_ab.py "16,2112,7168;table;16,128,12,8,3,4,$F" "1,2112,7168;table;16,32,4,4,3,8,$F" \
  "8,2112,7168;table;16,64,8,8,3,4,$F" "1,3072,1536;table;16,128,3,4,1,16,$F" "8,3072,1536;table;16,128,3,8,1,16,$F" \
  "8,5760,2880;table;16,128,4,4,3,8,$F" > $OUT/configs-run2.txt 2>&1; echo "ab rc=$?"
grep -v Warn $OUT/configs-run2.txt | cut -c1-150
timeout 100 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench \
  --no-progress --no-plot --budget 0.3 > $OUT/bench-run2.log 2>&1; echo "bench rc=$?"
tail -n 14 $OUT/bench-run2.log | cut -c1-150
