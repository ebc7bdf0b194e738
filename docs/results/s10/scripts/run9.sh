set -u
export PYTHONPATH=$PWD/src
git log --oneline -1 2>/dev/null
timeout 100 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b9 --no-progress --no-plot --budget 0.3 > $OUT/bench-run9.log 2>&1; echo "bench rc=$?"
timeout 80 python3 -m mxfp4 bench --shapes 128,3072,1536 192,3072,1536 192,4096,512 256,4096,512 128,4096,512 64,2880,2880 128,7168,2048 192,2880,2880 384,4096,512 --providers mxfp4 cublas_bf16 --out /tmp/b9m --no-progress --no-plot --budget 0.3 > $OUT/bench-mid-run9.log 2>&1; echo "mid rc=$?"
timeout 200 python3 -m pytest -q -m gpu tests/test_kernel.py tests/test_nn.py > $OUT/tests-kernel-nn-run9.log 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/tests-kernel-nn-run9.log
grep -A3 "geometric" $OUT/bench-run9.log; grep -E "^[0-9]+x" $OUT/bench-run9.log | awk '{print $1,$2,$3}' | paste - - -
grep -A2 "geometric" $OUT/bench-mid-run9.log; grep -E "^[0-9]+x" $OUT/bench-mid-run9.log | awk '{print $1,$2,$3}' | paste - -
