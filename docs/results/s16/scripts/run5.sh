set -u
export PYTHONPATH=$PWD/src
S="64,3072,1536 128,3072,1536 192,3072,1536 64,4096,512 128,4096,512 192,4096,512 256,4096,512 128,2880,512 256,2880,512 64,2880,2880 128,2880,2880 192,2880,2880"
timeout 330 python3 -m mxfp4 tune --shapes $S --kernel int8 --out $OUT/h200-tuned-run5.json --replace --trials $OUT/trials-run5.csv --no-progress --jobs 15 > $OUT/tune-run5.log 2>&1; echo "tune rc=$?"
tail -n 14 $OUT/tune-run5.log | cut -c1-160
cp src/mxfp4/configs/h200.json $OUT/h200-before-run5.json
python3 docs/results/s15/scripts/merge_table.py $OUT/h200-tuned-run5.json
timeout 150 python3 -m mxfp4 bench --shapes $S --providers mxfp4 cublas_bf16 --out $OUT/bench-run5 --no-progress --no-plot --budget 0.3 > $OUT/bench-run5.log 2>&1; echo "bench rc=$?"
grep -E "mxfp4|cublas" $OUT/bench-run5.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
