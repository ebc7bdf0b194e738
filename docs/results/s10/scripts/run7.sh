set -u
export PYTHONPATH=$PWD/src
S="96,2112,7168 96,3072,1536 96,24576,1536 96,4096,512 96,7168,2048 96,4608,7168 96,7168,2304 96,5120,2880 96,2880,4096 96,5760,2880 96,2880,2880"
timeout 100 python3 -m mxfp4 bench --shapes $S --providers mxfp4 cublas_bf16 --out /tmp/b7a --no-progress --no-plot --budget 0.3 > $OUT/bench-m96-before-run7.log 2>&1; echo "before rc=$?"
timeout 240 python3 -m mxfp4 tune --shapes $S --kernel int8,int8_meet --out src/mxfp4/configs/h200.json --trials $OUT/trials-run7-m96.csv --no-progress --jobs 14 > $OUT/tune-run7-m96.log 2>&1; echo "tune rc=$?"
cp src/mxfp4/configs/h200.json $OUT/h200-run7.json
timeout 100 python3 -m mxfp4 bench --shapes $S --providers mxfp4 cublas_bf16 --out /tmp/b7b --no-progress --no-plot --budget 0.3 > $OUT/bench-m96-after-run7.log 2>&1; echo "after rc=$?"
tail -n 14 $OUT/tune-run7-m96.log | cut -c1-140
for f in before after; do echo "== $f"; grep -A2 geometric $OUT/bench-m96-$f-run7.log; grep -E "^[0-9]+x" $OUT/bench-m96-$f-run7.log | awk '{print $1,$2,$3}' | paste - -; done
