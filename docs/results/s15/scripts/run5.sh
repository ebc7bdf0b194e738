set -u
export PYTHONPATH=$PWD/src
timeout 250 python3 -m mxfp4 tune --shapes 64,4096,512 128,4096,512 192,4096,512 256,4096,512 384,4096,512 1024,4096,512 128,2880,512 256,2880,512 512,2880,512 64,3072,1536 128,3072,1536 192,3072,1536 384,3072,1536 512,3072,1536 --kernel int8,int8_meet --out $OUT/h200-tuned-run5.json --replace --trials $OUT/trials-run5.csv --no-progress --jobs 15 > $OUT/tune-run5.log 2>&1; echo "tune rc=$?"
tail -n 20 $OUT/tune-run5.log | cut -c1-160
timeout 280 python3 -m pytest -v -m gpu tests/test_int8.py -k "odd_shapes or two_programs" > $OUT/tests-int8-run5.log 2>&1; echo "int8 tests rc=$?"
grep -c PASSED $OUT/tests-int8-run5.log; grep -E "FAILED|ERROR" $OUT/tests-int8-run5.log | head; tail -n 1 $OUT/tests-int8-run5.log
