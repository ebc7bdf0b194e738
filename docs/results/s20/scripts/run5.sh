set -u
export PYTHONPATH=$PWD/src
C="table;16,32,1,4,4,8,int8;16,64,1,4,4,8,int8;16,32,2,4,4,8,int8;16,64,2,4,4,8,int8;16,32,1,4,4,4,int8"
timeout 300 python3 tools/config_ab.py "4,2880,512;$C" "32,4096,512;$C" "16,2112,7168;$C" "8,2112,7168;$C" "1,2112,7168;$C" "8,4608,7168;$C" "8,24576,1536;$C" "1,7168,2048;$C" "32,2880,512;$C" > $OUT/cfg-small-run5.txt 2>&1; echo "ab rc=$?"
timeout 150 python3 -m pytest -q -m gpu tests/test_table_gpu.py -k "3072" -p no:cacheprovider > $OUT/gpu-table-3072-run5.txt 2>&1; echo "table test rc=$?"
timeout 60 python3 -m mxfp4 bench --shapes 16,3072,1536 8,3072,1536 --providers mxfp4 cublas_bf16 --out /tmp/b5 --no-progress --no-plot --budget 0.3 > $OUT/bench-16x3072-run5.log 2>&1; echo "bench rc=$?"
tail -n 1 $OUT/gpu-table-3072-run5.txt
grep -E "^[0-9]+x" $OUT/bench-16x3072-run5.log | cut -c1-60
grep -E "cuBLAS|^  \[|geomean" $OUT/cfg-small-run5.txt | cut -c1-120
