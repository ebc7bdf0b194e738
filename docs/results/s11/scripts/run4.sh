set -u
export PYTHONPATH=$PWD/src
timeout 200 python3 tools/launch_probe.py 132 264 > $OUT/launch-probe-run4.txt 2>&1; echo "probe rc=$?"
cat $OUT/launch-probe-run4.txt | grep -v Warn
