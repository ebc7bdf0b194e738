set -u
export PYTHONPATH=$PWD/src
timeout 150 python3 -X faulthandler -m pytest -x -v -m gpu tests/test_tools.py -p no:cacheprovider > $OUT/gpu-tools-run4.txt 2>&1; echo "tools rc=$?"
tail -n 25 $OUT/gpu-tools-run4.txt | cut -c1-300
cd old_s18 && PYTHONPATH=$PWD/src timeout 150 python3 -X faulthandler -m pytest -x -v -m gpu tests/test_tools.py -p no:cacheprovider > $OUT/gpu-tools-old-run4.txt 2>&1; echo "old tools rc=$?"
tail -n 8 $OUT/gpu-tools-old-run4.txt | cut -c1-300
