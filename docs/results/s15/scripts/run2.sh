set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 tools/knob_ab.py INT8_PDL 0 1 1024,3072,1536 640,7168,2048 512,7168,2048 512,3072,1536 1024,2112,7168 512,24576,1536 1024,7168,2048 192,24576,1536 > $OUT/pdl-ab-large-run2.txt 2>&1; echo "knob_ab large rc=$?"
cat $OUT/pdl-ab-large-run2.txt | tail -12
timeout 120 python3 tools/knob_ab.py INT8_PDL 1 2 192,2880,2880 384,3072,1536 384,4096,512 256,2880,4096 256,3072,1536,64,64,1,4,3,8,int8 128,4096,512,64,64,1,4,4,8,int8 > $OUT/pdl-trigger-run2.txt 2>&1; echo "knob_ab trigger rc=$?"
cat $OUT/pdl-trigger-run2.txt | tail -10
timeout 300 python3 -m pytest -v -m gpu tests/test_fused_gpu.py > $OUT/tests-fused-run2.log 2>&1; echo "fused tests rc=$?"
grep -c PASSED $OUT/tests-fused-run2.log; grep -E "FAILED|ERROR" $OUT/tests-fused-run2.log | head; tail -n 1 $OUT/tests-fused-run2.log
