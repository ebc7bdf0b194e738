set -u
export PYTHONPATH=$PWD/src
S="8,7168,2304 8,2880,4096 8,2880,2880 16,2112,7168 32,4096,512 32,2880,512 8,5120,2880 8,7168,2048 8,3072,1536 8,5760,2880"
timeout 420 python3 -m mxfp4 tune --shapes $S --kernel int8_fused --out src/mxfp4/configs/h200.json \
  --trials $OUT/trials-run3.csv --no-progress --jobs 15 > $OUT/tune-run3.log 2>&1; echo "tune rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200-run3.json; tail -n 14 $OUT/tune-run3.log | cut -c1-200
