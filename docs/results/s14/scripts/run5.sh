set -u
export PYTHONPATH=$PWD/src
S="1,2112,7168 1,3072,1536 1,4608,7168 1,5120,2880 1,2880,4096 1,5760,2880 1,2880,2880 8,2112,7168 8,4608,7168 8,7168,2304 8,2880,4096 8,2880,2880 16,2112,7168 8,5120,2880 8,7168,2048 8,3072,1536 8,5760,2880"
T=src/mxfp4/configs/h200.json
cp $T /tmp/before.json
timeout 330 python3 -m mxfp4 tune --shapes $S --kernel int8_fused --out $T --trials $OUT/trials-run5.csv --no-progress --jobs 15 > $OUT/tune-run5.log 2>&1; echo "tune rc=$?"
tail -n 3 $OUT/tune-run5.log | cut -c1-200
cp $T $OUT/h200-after-run5.json; cp $T /tmp/after.json
for i in 1 2; do for t in before after; do
  cp /tmp/$t.json $T
  timeout 60 python3 -m mxfp4 bench --shapes $S --providers mxfp4 --out /tmp/tb_$t$i --no-progress --no-plot --budget 0.3 > $OUT/tb-$t$i-run5.log 2>&1; echo "bench $t$i rc=$?"
done; done
cp /tmp/after.json $T
python3 - <<'PY'
import json, os
rows = {}
for tag in ("before1", "after1", "before2", "after2"):
    path = f"/tmp/tb_{tag}/results.json"
    for r in (json.load(open(path))["rows"] if os.path.exists(path) else []):
        rows.setdefault(f"{r['m']}x{r['n']}x{r['k']}", {})[tag] = (r["us"] or float("nan"), r["passes"])
b = json.load(open("/tmp/before.json"))["entries"]; a = json.load(open("/tmp/after.json"))["entries"]
cfg = lambda es, s: next((e["config"] for e in es if f"{e['m']}x{e['n']}x{e['k']}" == s), None)
print("shape before1 after1 before2 after2 (us) passes changed")
for s, v in rows.items():
    print(s, " ".join(f"{v[k][0]:.2f}" if k in v else "-" for k in ("before1", "after1", "before2", "after2")),
          all(p for _, p in v.values()), cfg(b, s) != cfg(a, s))
PY
