set -u
export PYTHONPATH=$PWD/src
git log --oneline -1 2>/dev/null; git status --short 2>/dev/null | head
timeout 120 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b6 --no-progress --no-plot --budget 0.3 > $OUT/bench-run6.log 2>&1; echo "bench rc=$?"
timeout 90 python3 -m mxfp4 bench --shapes 1,3072,1536 8,3072,1536 1,4096,512 8,4096,512 1,2880,2880 8,2880,2880 1,5120,2880 1,2880,4096 8,5760,2880 1,2112,7168 8,2112,7168 --providers mxfp4 cublas_bf16 --out /tmp/b6d --no-progress --no-plot --budget 0.3 > $OUT/bench-decode-run6.log 2>&1; echo "decode rc=$?"
timeout 420 python3 -m pytest -q -m gpu tests > $OUT/tests-gpu-run6.log 2>&1; echo "tests rc=$?"
tail -n 3 $OUT/tests-gpu-run6.log
grep -A3 "geometric" $OUT/bench-run6.log; grep -E "^[0-9]+x" $OUT/bench-run6.log | awk '{print $1,$2,$3}' | paste - - - 
grep -A2 "geometric" $OUT/bench-decode-run6.log; grep -E "^[0-9]+x" $OUT/bench-decode-run6.log | awk '{print $1,$2,$3}' | paste - -
