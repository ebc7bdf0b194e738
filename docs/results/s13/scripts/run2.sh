set -u
export PYTHONPATH=$PWD/src
S="1,2112,7168 1,3072,1536 1,7168,2048 1,4608,7168 1,7168,2304 1,5120,2880 1,2880,4096 1,5760,2880 1,2880,2880 8,2112,7168 8,4608,7168"
timeout 420 python3 -m mxfp4 tune --shapes $S --kernel int8_fused --out src/mxfp4/configs/h200.json \
  --trials $OUT/trials-run2.csv --no-progress --jobs 15 > $OUT/tune-run2.log 2>&1; echo "tune rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200-run2.json; tail -n 14 $OUT/tune-run2.log | cut -c1-200
