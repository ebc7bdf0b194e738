"""Merge the entries of a tuner table (argv[1], written with --replace) into the shipped table,
replacing the entries of the same shapes (every tuned shape must already be in the table)."""
import json
import sys

path = "src/mxfp4/configs/h200.json"
table = json.load(open(path))
new = {(e["m"], e["n"], e["k"]): e["config"] for e in json.load(open(sys.argv[1]))["entries"]}
changed = 0
for e in table["entries"]:
    key = (e["m"], e["n"], e["k"])
    if key in new:
        changed += e["config"] != new[key]
        e["config"] = new.pop(key)
assert not new, f"not in the table: {sorted(new)}"
open(path, "w").write(json.dumps(table, indent=1) + "\n")
print(f"merged; {changed} picks changed")
