set -u
export PYTHONPATH=$PWD/src
timeout 150 python3 -X faulthandler -m pytest -q -m gpu tests/test_tools.py -p no:cacheprovider > $OUT/gpu-tools-run5.txt 2>&1; echo "tools rc=$?"
tail -n 3 $OUT/gpu-tools-run5.txt | cut -c1-300
