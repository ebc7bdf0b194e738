set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 -m pytest -v -m gpu tests/test_pdl.py > $OUT/tests-pdl-run9.log 2>&1; echo "pdl tests rc=$?"
grep -E "PASSED|FAILED|ERROR" $OUT/tests-pdl-run9.log | cut -c1-140; tail -n 1 $OUT/tests-pdl-run9.log
timeout 60 python3 -c "
import torch; from mxfp4 import residency
print('programmatic_launch', residency.programmatic_launch(torch.device('cuda')), torch.cuda.get_device_capability())"
