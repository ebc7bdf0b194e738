set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 -m pytest -q -m gpu tests/test_kernel.py tests/test_nn.py -p no:cacheprovider > $OUT/gpu-kernel-nn-run13.txt 2>&1; echo "tests rc=$?"
tail -n 1 $OUT/gpu-kernel-nn-run13.txt
