set -u
export PYTHONPATH=$PWD/src
timeout 120 python3 -m mxfp4 tune --shapes 32,4096,512 32,2880,512 --kernel int8_fused --out src/mxfp4/configs/h200.json \
  --trials $OUT/trials-run11.csv --no-progress --jobs 14 > $OUT/tune-run11.log 2>&1; echo "tune rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200-run11.json; tail -n 5 $OUT/tune-run11.log | cut -c1-200
timeout 70 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b11 --no-progress --no-plot --budget 0.3 > $OUT/bench-run11.log 2>&1; echo "bench rc=$?"
timeout 150 python3 -m pytest -q -m gpu tests/test_int8.py -k "fused_on_gpu" > $OUT/tests-run11.log 2>&1; echo "tests rc=$?"
tail -n 2 $OUT/tests-run11.log
grep -A3 "geometric" $OUT/bench-run11.log; grep -E "^[0-9]+x" $OUT/bench-run11.log | awk '{print $1,$2,$3}' | paste - - -
