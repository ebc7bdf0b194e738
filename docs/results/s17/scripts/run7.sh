set -u
export PYTHONPATH=$PWD/src
timeout 150 python3 -m pytest -q -m gpu tests/test_int8.py -k "odd_shapes or two_programs" -p no:cacheprovider > $OUT/gpu-int8-run7.txt 2>&1; echo "int8 rc=$?"
timeout 150 python3 -m pytest -q -m gpu tests/test_pdl.py tests/test_kernel.py tests/test_nn.py -p no:cacheprovider > $OUT/gpu-pdl-kernel-nn-run7.txt 2>&1; echo "pdl/kernel/nn rc=$?"
timeout 120 python3 -m pytest -q -m gpu tests/test_table_gpu.py -p no:cacheprovider > $OUT/gpu-table-run7.txt 2>&1; echo "table rc=$?"
timeout 100 python3 tools/timeline.py --int8 256,3072,1536 64,3072,1536 > $OUT/tl-final-run7.txt 2>&1; echo "tl rc=$?"
for f in $OUT/gpu-int8-run7.txt $OUT/gpu-pdl-kernel-nn-run7.txt $OUT/gpu-table-run7.txt; do tail -n 2 $f; done
grep -E "^[0-9]+x|fold done|waited|step 1 |loop done|mul end" $OUT/tl-final-run7.txt
