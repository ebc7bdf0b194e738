set -u
export PYTHONPATH=$PWD/src
S="192,3072,1536 384,3072,1536 512,3072,1536 192,2880,2880 128,3072,1536 256,2880,2880"
timeout 300 python3 -m mxfp4 tune --shapes $S --kernel int8 --out $OUT/h200-tuned-run8.json --replace --trials $OUT/trials-run8.csv --no-progress --jobs 15 > $OUT/tune-run8.log 2>&1; echo "tune rc=$?"
tail -n 8 $OUT/tune-run8.log | cut -c1-170
cp src/mxfp4/configs/h200.json $OUT/h200-before-run8.json
python3 docs/results/s15/scripts/merge_table.py $OUT/h200-tuned-run8.json
timeout 60 python3 -m pytest -q -m gpu tests/test_table_gpu.py -k "192x3072x1536 or 384x3072x1536 or 512x3072x1536 or 192x2880x2880 or 128x3072x1536 or 256x2880x2880" -p no:cacheprovider > $OUT/gpu-table-run8.txt 2>&1; echo "tests rc=$?"; tail -n 1 $OUT/gpu-table-run8.txt
timeout 60 python3 -m mxfp4 bench --shapes $S --providers mxfp4 cublas_bf16 --out $OUT/bench-run8 --no-progress --no-plot --budget 0.3 > $OUT/bench-run8.log 2>&1; echo "bench rc=$?"
grep -E "mxfp4|cublas" $OUT/bench-run8.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
