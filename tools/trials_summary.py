"""Best time per kernel per shape from a tuner trials CSV (`mxfp4 tune --trials`), fastest first.

Usage: python tools/trials_summary.py trials.csv
"""
import collections
import csv
import sys


def main(path: str) -> None:
    best = collections.defaultdict(dict)
    rejected = 0
    for r in csv.DictReader(open(path)):
        if not r["us"]:
            rejected += 1
            continue
        shape, kernel, us = "x".join((r["m"], r["n"], r["k"])), r["kernel"], float(r["us"])
        if kernel not in best[shape] or us < best[shape][kernel][0]:
            cfg = "{block_m}x{block_n} s{split_k} w{num_warps} st{num_stages} b{blocks_per_step}".format(**r)
            best[shape][kernel] = (us, cfg)
    for shape, per_kernel in best.items():
        ranked = sorted(per_kernel.items(), key=lambda kv: kv[1][0])
        print(shape, "  ".join(f"{k} {us:.2f} ({cfg})" for k, (us, cfg) in ranked))
    print("rejected", rejected)


if __name__ == "__main__":
    main(sys.argv[1])
