set -u
export PYTHONPATH=$PWD/src
timeout 100 python3 -m mxfp4 bench --shapes 64,4096,512 128,4096,512 128,2880,512 --providers mxfp4 cublas_bf16 --out $OUT/bench-run14 --no-progress --no-plot --budget 0.3 > $OUT/bench-run14.log 2>&1; echo "bench rc=$?"
grep -E "mxfp4|cublas" $OUT/bench-run14.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
