set -u
export PYTHONPATH=$PWD/src
S="8,24576,1536 8,4608,7168 8,7168,2304 8,2880,4096 8,2880,2880 16,2112,7168 8,5120,2880 8,7168,2048 8,5760,2880"
timeout 300 python3 -m mxfp4 tune --shapes $S --kernel int8_fused --out src/mxfp4/configs/h200.json \
  --trials $OUT/trials-run5.csv --no-progress --jobs 15 > $OUT/tune-run5.log 2>&1; echo "tune rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200-run5.json; tail -n 12 $OUT/tune-run5.log | cut -c1-200
