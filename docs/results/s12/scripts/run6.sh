set -u
export PYTHONPATH=$PWD/src
timeout 480 python3 -m pytest -q -m gpu tests > $OUT/tests-gpu-run6.log 2>&1; echo "tests rc=$?"
tail -n 5 $OUT/tests-gpu-run6.log | cut -c1-200
