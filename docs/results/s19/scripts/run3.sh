set -u
export PYTHONPATH=$PWD/src
timeout 70 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench-run3 --no-progress --no-plot --budget 0.3 > $OUT/bench-run3.log 2>&1; echo "bench rc=$?"
timeout 110 python3 -m pytest -q -m gpu tests/test_table_gpu.py tests/test_pdl.py -p no:cacheprovider > $OUT/gpu-table-pdl-run3.txt 2>&1; echo "tests table rc=$?"
timeout 170 python3 -m pytest -q -m gpu tests/test_kernel.py tests/test_nn.py -p no:cacheprovider > $OUT/gpu-kernel-nn-run3.txt 2>&1; echo "tests kernel rc=$?"
timeout 120 python3 -m pytest -q -m gpu tests/test_tools.py -p no:cacheprovider > $OUT/gpu-tools-run3.txt 2>&1; echo "tests tools rc=$?"
tail -n 1 $OUT/gpu-table-pdl-run3.txt $OUT/gpu-kernel-nn-run3.txt $OUT/gpu-tools-run3.txt
grep -E "mxfp4|cublas|stream" $OUT/bench-run3.log | awk '{print $1, $2, $3}'
