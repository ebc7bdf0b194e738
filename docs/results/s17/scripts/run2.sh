set -u
export PYTHONPATH=$PWD/src
cd tools && timeout 130 python3 warm_probe.py 4,2880,512 16,2112,7168 32,4096,512 32,2880,512 64,7168,2048 256,3072,1536 512,2880,512 128,3072,1536 > $OUT/warm-twin-run2.txt 2>&1; echo "warm rc=$?"; cd ..
timeout 90 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench-run2 --no-progress --no-plot --budget 0.3 > $OUT/bench-run2.log 2>&1; echo "bench rc=$?"
timeout 320 python3 -m pytest -q -m gpu tests/test_table_gpu.py --durations=5 -p no:cacheprovider > $OUT/table-gpu-run2.txt 2>&1; echo "table tests rc=$?"
tail -n 12 $OUT/table-gpu-run2.txt
tail -n 12 $OUT/bench-run2.log
cat $OUT/warm-twin-run2.txt
