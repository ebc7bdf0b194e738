set -u
export PYTHONPATH=$PWD/src
timeout 60 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out $OUT/bench-run11 --no-progress --no-plot --budget 0.3 > $OUT/bench-run11.log 2>&1; echo "bench rc=$?"
timeout 120 python3 -m mxfp4 bench --shapes 64,2112,7168 64,2880,2880 64,2880,4096 64,3072,1536 64,4096,512 64,4608,7168 64,5120,2880 64,5760,2880 64,7168,2304 128,2112,7168 128,3072,1536 128,2880,2880 128,4096,512 128,7168,2048 128,4608,7168 128,7168,2304 128,5120,2880 128,2880,4096 128,5760,2880 192,4096,512 192,3072,1536 256,4096,512 128,2880,512 256,2880,512 512,2880,512 1024,4096,512  192,2880,2880 384,3072,1536 384,4096,512 512,3072,1536 1024,3072,1536 640,7168,2048 256,7168,2048 --providers mxfp4 cublas_bf16 --out $OUT/bench-mid-run11 --no-progress --no-plot --budget 0.3 > $OUT/bench-mid-run11.log 2>&1; echo "bench mid rc=$?"
timeout 90 python3 tools/timeline.py 256,3072,1536 > $OUT/tl-meet-run11.txt 2>&1; echo "tl meet rc=$?"
timeout 90 python3 tools/timeline.py --int8 256,3072,1536 > $OUT/tl-int8-run11.txt 2>&1; echo "tl int8 rc=$?"
timeout 100 python3 -m pytest -q -m gpu tests/test_table_gpu.py tests/test_pdl.py -p no:cacheprovider > $OUT/gpu-table-pdl-run11.txt 2>&1; echo "tests rc=$?"
timeout 170 python3 -m pytest -q -m gpu tests/test_int8.py -k "odd_shapes or two_programs" -p no:cacheprovider > $OUT/gpu-int8-run11.txt 2>&1; echo "tests int8 rc=$?"
tail -n 1 $OUT/gpu-table-pdl-run11.txt $OUT/gpu-int8-run11.txt
grep -E "mxfp4|cublas" $OUT/bench-mid-run11.log | awk '{print $1, $2, $3}' | paste - - | awk '{printf "%s %s %s %.2f\n", $1, $3, $6, $3/$6}'
grep -E "mxfp4|cublas|stream" $OUT/bench-run11.log | awk '{print $1, $2, $3}'
grep -E "^[0-9]+x| met | step 1 | step 2 | mul waited| end | mul end" $OUT/tl-meet-run11.txt $OUT/tl-int8-run11.txt | cut -c1-160
