set -u
export PYTHONPATH=$PWD/src
S="16,2112,7168 1,2112,7168 1,7168,2048 1,4608,7168 1,7168,2304 1,5760,2880 8,2112,7168 8,4608,7168 8,7168,2304 8,5760,2880 1,24576,1536 8,24576,1536"
timeout 420 python3 -m mxfp4 tune --shapes $S --kernel int8_fused --out src/mxfp4/configs/h200.json \
  --trials $OUT/trials-run9.csv --no-progress --jobs 15 > $OUT/tune-run9.log 2>&1; echo "tune rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200-run9.json; tail -n 15 $OUT/tune-run9.log | cut -c1-200
