"""config_ab specs: each int8_meet entry of the shipped table outside the benchmark set, its pick
against the int8 kernel (two launches) on the same tile, split, warps, stages and K step."""
import json

BENCH = {(4, 2880, 512), (16, 2112, 7168), (32, 4096, 512), (32, 2880, 512), (64, 7168, 2048), (256, 3072, 1536)}
for e in json.load(open("src/mxfp4/configs/h200.json"))["entries"]:
    c = e["config"]
    if c["kernel"] != "int8_meet" or (e["m"], e["n"], e["k"]) in BENCH or c["fold_blocks"] or c["packed"]:
        continue
    fields = [c[f] for f in ("block_m", "block_n", "split_k", "num_warps", "num_stages", "blocks_per_step")]
    print(f"{e['m']},{e['n']},{e['k']};table;{','.join(map(str, fields))},int8")
