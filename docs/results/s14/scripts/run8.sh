set -u
S="1,2112,7168 1,3072,1536 1,4608,7168 1,5120,2880 1,2880,4096 1,5760,2880 1,2880,2880 8,2112,7168 8,4608,7168 8,7168,2304 8,2880,4096 8,2880,2880 16,2112,7168 8,5120,2880 8,7168,2048 8,3072,1536 8,5760,2880 64,2112,7168 192,2112,7168"
for i in 1 2; do for t in old new; do
  if [ $t = old ]; then P=$PWD/ab_old/src; else P=$PWD/src; fi
  PYTHONPATH=$P timeout 80 python3 -m mxfp4 bench --shapes $S --providers mxfp4 --out /tmp/ab_$t$i --no-progress --no-plot --budget 0.3 > $OUT/ab-$t$i-run8.log 2>&1; echo "bench $t$i rc=$?"
done; done
python3 - <<'PY'
import json, os
rows = {}
for tag in ("old1", "new1", "old2", "new2"):
    path = f"/tmp/ab_{tag}/results.json"
    for r in (json.load(open(path))["rows"] if os.path.exists(path) else []):
        rows.setdefault(f"{r['m']}x{r['n']}x{r['k']}", {})[tag] = (r["us"] or float("nan"), r["passes"])
print("shape old1 new1 old2 new2 (us; all outputs checked: passes)")
for s, v in rows.items():
    print(s, " ".join(f"{v[k][0]:.2f}" if k in v else "-" for k in ("old1", "new1", "old2", "new2")),
          all(p for _, p in v.values()))
PY
PYTHONPATH=$PWD/src timeout 150 python3 -m pytest -v -m gpu tests/test_int8.py tests/test_kernel.py -k "shared_split_sum or deterministic_over_100" > $OUT/tests-split-run8.log 2>&1; echo "tests rc=$?"
grep -c PASSED $OUT/tests-split-run8.log; grep -c FAILED $OUT/tests-split-run8.log; tail -n 3 $OUT/tests-split-run8.log | cut -c1-300
