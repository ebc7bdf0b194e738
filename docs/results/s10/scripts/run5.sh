S="4,2880,512 32,4096,512 32,2880,512 16,2112,7168 64,7168,2048 256,3072,1536 1,3072,1536 8,3072,1536 8,5760,2880 1,4096,512 8,4096,512 1,7168,2048 8,2880,2880 192,4096,512 256,4096,512 128,3072,1536 512,4096,512 384,3072,1536"
for i in 1 2; do
PYTHONPATH=$PWD/ab_old/src timeout 140 python3 ab_time.py old $S >> $OUT/ab-run5.txt 2>&1
PYTHONPATH=$PWD/src timeout 140 python3 ab_time.py new $S >> $OUT/ab-run5.txt 2>&1
done
python3 - <<'P'
import os, collections, math
d=collections.defaultdict(lambda: collections.defaultdict(list)); cb=collections.defaultdict(list); ok=True
for line in open(os.environ["OUT"]+"/ab-run5.txt"):
    f=line.split()
    if len(f)!=6 or f[0] not in ("old","new"): print(line.rstrip()); continue
    d[f[1]][f[0]].append(float(f[3])); cb[f[1]].append(float(f[4])); ok &= f[5]=="True"
print(f"{'shape':>16} {'kernel':>10} {'old':>14} {'new':>14} {'cublas':>7}")
go=gn=gc=0
for s,v in d.items():
    o,n=v["old"],v["new"]; c=sum(cb[s])/len(cb[s])
    print(f"{s:>16} {o[0]:.2f}/{o[1]:.2f} -> {n[0]:.2f}/{n[1]:.2f}  mean {sum(o)/2:.2f} -> {sum(n)/2:.2f}  cublas {c:.2f}")
    go+=math.log(sum(o)/2); gn+=math.log(sum(n)/2); gc+=math.log(c)
k=len(d); print(f"geomean {k}: old {math.exp(go/k):.2f} new {math.exp(gn/k):.2f} cublas {math.exp(gc/k):.2f}; all exact {ok}")
P
