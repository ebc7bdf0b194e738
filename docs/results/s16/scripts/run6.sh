set -u
export PYTHONPATH=$PWD/src
M="64,2112,7168 64,2880,4096 64,5120,2880 64,5760,2880 64,7168,2304 128,2112,7168 128,2880,4096 128,5120,2880 128,5760,2880"
timeout 100 python3 -m mxfp4 tune --shapes 64,7168,2048 --kernel int8_meet --out $OUT/h200-tuned-meet-run6.json --replace --trials $OUT/trials-meet-run6.csv --no-progress --jobs 15 > $OUT/tune-meet-run6.log 2>&1; echo "tune meet rc=$?"
tail -n 3 $OUT/tune-meet-run6.log | cut -c1-160
timeout 250 python3 -m mxfp4 tune --shapes $M --kernel int8 --out $OUT/h200-tuned-run6.json --replace --trials $OUT/trials-run6.csv --no-progress --jobs 15 > $OUT/tune-run6.log 2>&1; echo "tune rc=$?"
tail -n 11 $OUT/tune-run6.log | cut -c1-160
cp src/mxfp4/configs/h200.json $OUT/h200-before-run6.json
python3 docs/results/s15/scripts/merge_table.py $OUT/h200-tuned-meet-run6.json
python3 docs/results/s15/scripts/merge_table.py $OUT/h200-tuned-run6.json
timeout 100 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench-run6 --no-progress --no-plot --budget 0.3 > $OUT/bench-run6.log 2>&1; echo "bench rc=$?"
grep -E "^ *[0-9]+x" $OUT/bench-run6.log | awk '{print $1, $2, $3}' | paste - - - ; tail -n 6 $OUT/bench-run6.log
timeout 150 python3 -m mxfp4 bench --shapes $M 64,3072,1536 64,4096,512 128,4096,512 128,2880,512 64,2880,2880 --providers mxfp4 cublas_bf16 --out $OUT/bench-mid-run6 --no-progress --no-plot --budget 0.3 > $OUT/bench-mid-run6.log 2>&1; echo "bench mid rc=$?"
grep -E "mxfp4|cublas" $OUT/bench-mid-run6.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
