"""Print results.csv files as one line per shape: each provider's us, and each provider / cuBLAS bf16."""
import csv
import math
import sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    provs = list(dict.fromkeys(r["provider"] for r in rows))
    by = {}
    for r in rows:
        by.setdefault(f'{r["m"]}x{r["n"]}x{r["k"]}', {})[r["provider"]] = float(r["us"]) if r["status"] == "ok" else math.nan
    print(f"== {path}")
    print("shape".ljust(16) + "".join(p[:14].rjust(15) for p in provs) + "   ratios to cublas_bf16")
    logs = {p: [] for p in provs}
    for shape, d in by.items():
        bf = d.get("cublas_bf16", math.nan)
        print(shape.ljust(16) + "".join(f"{d.get(p, math.nan):15.2f}" for p in provs) + "   "
              + " ".join(f"{d.get(p, math.nan) / bf:.2f}" for p in provs if p != "cublas_bf16"))
        for p in provs:
            if d.get(p, math.nan) == d.get(p, math.nan):
                logs[p].append(math.log(d[p]))
    print("geomean".ljust(16) + "".join(f"{math.exp(sum(v) / len(v)) if v else math.nan:15.2f}" for v in logs.values()))
