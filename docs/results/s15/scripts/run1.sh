set -u
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 200 python3 -m pytest -v -m gpu tests/test_pdl_gpu.py > $OUT/tests-pdl-run1.log 2>&1; echo "pdl tests rc=$?"
grep -E "PASSED|FAILED|ERROR" $OUT/tests-pdl-run1.log | cut -c1-150; tail -n 1 $OUT/tests-pdl-run1.log
timeout 90 python3 docs/results/s15/scripts/pdl_nowait.py > $OUT/pdl-nowait-run1.txt 2>&1; echo "nowait rc=$?"; cat $OUT/pdl-nowait-run1.txt | tail -12
timeout 200 python3 tools/knob_ab.py INT8_PDL 0 1 192,2880,2880 384,3072,1536 256,7168,2048 384,4096,512 1024,3072,1536 256,2880,4096 640,7168,2048 256,2112,7168 > $OUT/pdl-ab-run1.txt 2>&1; echo "knob_ab rc=$?"
cat $OUT/pdl-ab-run1.txt | tail -25
timeout 180 python3 tools/config_ab.py '256,3072,1536;table;64,64,1,4,3,8,int8' '64,7168,2048;table;64,64,1,4,4,8,int8' '128,3072,1536;table;64,64,1,4,4,8,int8' '256,4096,512;table;64,64,1,4,3,8,int8' '192,3072,1536;table;64,64,1,4,3,8,int8' '128,4096,512;table;64,64,1,4,4,8,int8' > $OUT/pdl-vs-meet-run1.txt 2>&1; echo "config_ab rc=$?"
cat $OUT/pdl-vs-meet-run1.txt | tail -25
