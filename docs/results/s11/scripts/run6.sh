set -u
export PYTHONPATH=$PWD/src
timeout 420 python3 -m mxfp4 tune --shapes 64,2880,512 128,2880,512 256,2880,512 512,2880,512 1024,2880,512 \
  1024,2112,7168 1024,4096,512 1024,3072,1536 640,7168,2048 640,2112,7168 \
  --out src/mxfp4/configs/h200.json --trials $OUT/trials-run6.csv --no-progress --jobs 14 \
  > $OUT/tune-run6.log 2>&1; echo "tune rc=$?"; cp src/mxfp4/configs/h200.json $OUT/h200-run6.json
tail -n 13 $OUT/tune-run6.log | cut -c1-200
timeout 150 python3 -m mxfp4 bench --shapes 48,2880,512 48,2112,7168 48,4096,512 48,7168,2048 48,3072,1536 100,2880,512 100,2112,7168 100,4096,512 100,7168,2048 100,3072,1536 333,2880,512 333,2112,7168 333,4096,512 333,7168,2048 333,3072,1536 640,2880,512 640,2112,7168 640,4096,512 640,7168,2048 640,3072,1536 1024,2880,512 1024,2112,7168 1024,4096,512 1024,7168,2048 1024,3072,1536 --providers mxfp4 cublas_bf16 --out $OUT/sweep --no-progress --no-plot --budget 0.3 > $OUT/bench-sweep-run6.log 2>&1; echo "sweep rc=$?"
grep -A2 "geometric" $OUT/bench-sweep-run6.log; grep -E "^[0-9]+x" $OUT/bench-sweep-run6.log | awk '{print $1,$2,$3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
