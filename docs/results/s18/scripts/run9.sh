set -u
export PYTHONPATH=$PWD/src
timeout 150 python3 tools/timeline.py --warm-sets none,wq 256,3072,1536 64,7168,2048 > $OUT/tl-meet-steps-run9.txt 2>&1; echo "tl rc=$?"
timeout 100 python3 -m mxfp4 bench --shapes 1,2112,7168 1,24576,1536 1,7168,2048 1,4608,7168 1,7168,2304 1,5120,2880 1,2880,4096 1,5760,2880 1,2880,2880 8,2112,7168 8,24576,1536 8,4608,7168 8,7168,2304 8,2880,4096 8,2880,2880 8,5120,2880 8,7168,2048 8,5760,2880 8,3072,1536 1,3072,1536 --providers mxfp4 cublas_bf16 --out $OUT/bench-decode-run9 --no-progress --no-plot --budget 0.3 > $OUT/bench-decode-run9.log 2>&1; echo "bench decode rc=$?"
timeout 200 python3 -m pytest -q -m gpu tests/test_pdl.py tests/test_kernel.py tests/test_nn.py -p no:cacheprovider > $OUT/gpu-pdl-kernel-nn-run9.txt 2>&1; echo "tests rc=$?"
tail -n 2 $OUT/gpu-pdl-kernel-nn-run9.txt
grep -E "mxfp4|cublas" $OUT/bench-decode-run9.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
grep -E "^[0-9]+x| fold done| met | step | end " $OUT/tl-meet-steps-run9.txt | cut -c1-150
