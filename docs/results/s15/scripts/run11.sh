set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 -m mxfp4 tune --shapes 64,2880,2880 128,2112,7168 128,2880,2880 192,2880,2880 128,5120,2880 64,2112,7168 256,2880,2880 --kernel int8,int8_meet --out $OUT/h200-tuned-run11.json --replace --trials $OUT/trials-run11.csv --no-progress --jobs 15 > $OUT/tune-run11.log 2>&1; echo "tune rc=$?"
tail -n 9 $OUT/tune-run11.log | cut -c1-150
python3 docs/results/s15/scripts/merge_table.py $OUT/h200-tuned-run11.json
timeout 120 python3 -m mxfp4 bench --shapes 64,2880,2880 128,2112,7168 128,2880,2880 192,2880,2880 128,5120,2880 64,2112,7168 256,2880,2880 --providers mxfp4 cublas_bf16 --out $OUT/bench-run11 --no-progress --no-plot --budget 0.3 > $OUT/bench-run11.log 2>&1; echo "bench rc=$?"
grep -E "mxfp4|cublas" $OUT/bench-run11.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
