set -u
export PYTHONPATH=$PWD/src
S="64,4096,512 128,2880,512 128,4096,512 64,3072,1536"
timeout 200 python3 -m mxfp4 tune --shapes $S --kernel int8,int8_fused --out $OUT/h200-tuned-run13.json --replace --trials $OUT/trials-run13.csv --no-progress --jobs 15 > $OUT/tune-run13.log 2>&1; echo "tune rc=$?"
tail -n 6 $OUT/tune-run13.log | cut -c1-160
