set -u
export PYTHONPATH=$PWD/src
S="512,2880,512 256,2880,512 384,4096,512 128,2880,512"
timeout 130 python3 -m mxfp4 tune --shapes $S --kernel int8 --out $OUT/h200-tuned-run12.json --replace --trials $OUT/trials-run12.csv --no-progress --jobs 15 > $OUT/tune-run12.log 2>&1; echo "tune rc=$?"
tail -n 7 $OUT/tune-run12.log | cut -c1-170
cp src/mxfp4/configs/h200.json $OUT/h200-before-run12.json
python3 docs/results/s15/scripts/merge_table.py $OUT/h200-tuned-run12.json
timeout 60 python3 -m pytest -q -m gpu tests/test_table_gpu.py -k "512x2880x512 or 256x2880x512 or 384x4096x512 or 128x2880x512" -p no:cacheprovider > $OUT/gpu-table-run12.txt 2>&1; echo "tests rc=$?"; tail -n 1 $OUT/gpu-table-run12.txt
timeout 40 python3 -m mxfp4 bench --shapes $S --providers mxfp4 cublas_bf16 --out $OUT/bench-run12 --no-progress --no-plot --budget 0.3 > $OUT/bench-run12.log 2>&1; echo "bench rc=$?"
grep -E "mxfp4|cublas" $OUT/bench-run12.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
