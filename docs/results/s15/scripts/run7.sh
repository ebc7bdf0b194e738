set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 tools/knob_ab.py INT8_W_PREFETCH 0 1 64,3072,1536 128,3072,1536 192,3072,1536 64,4096,512 256,4096,512 128,2112,7168 64,2880,2880 512,3072,1536 1024,3072,1536 > $OUT/wpf-ab-run7.txt 2>&1; echo "knob_ab rc=$?"
cat $OUT/wpf-ab-run7.txt | tail -11
