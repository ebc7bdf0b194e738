set -u
export PYTHONPATH=$PWD/src
timeout 130 python3 tools/knob_ab.py INT8_PDL 0 2 1024,2112,7168 1024,7168,2048 1024,3072,1536 640,7168,2048 512,3072,1536 384,4096,512 > $OUT/pdl-ab2-run3.txt 2>&1; echo "knob_ab 0/2 rc=$?"
cat $OUT/pdl-ab2-run3.txt | tail -9
timeout 300 python3 tools/config_ab.py $(python3 docs/results/s15/scripts/meet_specs.py) > $OUT/meet-vs-int8-run3.txt 2>&1; echo "config_ab rc=$?"
grep -E "cuBLAS|\[|geomean" $OUT/meet-vs-int8-run3.txt | sed -e 's/ regs.*//' | cut -c1-110
timeout 120 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench-run3 --no-progress --no-plot --budget 0.3 > $OUT/bench-run3.log 2>&1; echo "bench rc=$?"
tail -n 12 $OUT/bench-run3.log
