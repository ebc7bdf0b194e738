set -u
export PYTHONPATH=$PWD/src
E="64,2880,2880 128,2880,2880 192,2880,2880 64,5120,2880 128,2880,4096 64,7168,2304 256,7168,2048 128,3072,1536 192,3072,1536 384,3072,1536"
timeout 120 python3 tools/knob_ab.py INT8_W_PF_BYTES 512 1024 $E > $OUT/bytes1024-run4.txt 2>&1; echo "bytes rc=$?"
timeout 200 python3 -m pytest -q -m gpu tests/test_pdl.py tests/test_int8.py -k "odd_shapes or two_programs or pdl or prefetch" -p no:cacheprovider > $OUT/gpu-int8-pdl-run4.txt 2>&1; echo "tests rc=$?"
tail -n 2 $OUT/gpu-int8-pdl-run4.txt
grep -v "^held" $OUT/bytes1024-run4.txt | cut -c1-104
