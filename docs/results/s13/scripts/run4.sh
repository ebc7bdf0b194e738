set -u
export PYTHONPATH=$PWD/src
timeout 70 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b4 --no-progress --no-plot --budget 0.3 > $OUT/bench-run4.log 2>&1; echo "bench rc=$?"
timeout 150 python3 -m mxfp4 bench --shapes 1,2112,7168 1,24576,1536 1,7168,2048 1,4608,7168 1,7168,2304 1,5120,2880 1,2880,4096 1,5760,2880 1,2880,2880 8,2112,7168 8,24576,1536 8,4608,7168 8,7168,2304 8,2880,4096 8,2880,2880 8,5120,2880 8,7168,2048 8,5760,2880 8,3072,1536 1,3072,1536 --providers mxfp4 cublas_bf16 --out /tmp/d4 --no-progress --no-plot --budget 0.3 > $OUT/bench-decode-run4.log 2>&1; echo "decode rc=$?"
grep -A3 "geometric" $OUT/bench-run4.log; grep -E "^[0-9]+x" $OUT/bench-run4.log | awk '{print $1,$2,$3}' | paste - - -
grep -E "^[0-9]+x" $OUT/bench-decode-run4.log | awk '{print $1,$2,$3}' | paste - - ; grep -A3 "geometric" $OUT/bench-decode-run4.log
