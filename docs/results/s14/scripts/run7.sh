set -u
export PYTHONPATH=$PWD/src
for i in 1 2; do
  timeout 100 python3 -m pytest -v -m gpu tests/test_int8.py -k "shared_split_sum" --durations=0 > $OUT/tests-split-run7-$i.log 2>&1; echo "tests $i rc=$?"
  grep -E "PASSED|FAILED|passed|failed|s call" $OUT/tests-split-run7-$i.log | cut -c1-120
done
