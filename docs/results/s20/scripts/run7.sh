set -u
export PYTHONPATH=$PWD/src
timeout 120 python3 -m mxfp4 bench --shapes 4,2880,512 256,3072,1536 16,3072,1536 --out /tmp/b7 --no-progress --no-plot --budget 0.3 > $OUT/bench-all-providers-run7.log 2>&1; echo "bench rc=$?"
timeout 200 python3 -m pytest -q -m gpu tests/test_table_gpu.py tests/test_pdl.py -p no:cacheprovider > $OUT/gpu-table-pdl-run7.txt 2>&1; echo "tests rc=$?"
tail -n 1 $OUT/gpu-table-pdl-run7.txt
grep -E "^[0-9]+x|geomean|  [a-z_0-9]+ +n=" $OUT/bench-all-providers-run7.log | cut -c1-110
