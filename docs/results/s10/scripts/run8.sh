S="64,7168,2048 256,3072,1536 192,4096,512 256,4096,512 128,3072,1536 192,3072,1536 64,2880,2880 128,7168,2048 64,4096,512"
for i in 1 2; do
PYTHONPATH=$PWD/ab_old/src timeout 100 python3 ab_time.py old $S >> $OUT/ab-run8.txt 2>&1
PYTHONPATH=$PWD/src timeout 100 python3 ab_time.py new $S >> $OUT/ab-run8.txt 2>&1
done
export PYTHONPATH=$PWD/src
timeout 60 python3 tools/timeline.py 256,3072,1536 64,7168,2048 > $OUT/timeline-run8.txt 2>&1; echo "timeline rc=$?"
timeout 150 python3 -m pytest -q -m gpu tests/test_int8.py -k "meet or odd" > $OUT/tests-run8.log 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/tests-run8.log
python3 - <<'P'
import os, collections, math
d=collections.defaultdict(lambda: collections.defaultdict(list)); cb=collections.defaultdict(list); ok=True
for line in open(os.environ["OUT"]+"/ab-run8.txt"):
    f=line.split()
    if len(f)!=6 or f[0] not in ("old","new"): print(line.rstrip()); continue
    d[f[1]][f[0]].append(float(f[3])); cb[f[1]].append(float(f[4])); ok &= f[5]=="True"
go=gn=gc=0
for s,v in d.items():
    o,n=v["old"],v["new"]; c=sum(cb[s])/len(cb[s])
    print(f"{s:>16} {'/'.join(f'{x:.2f}' for x in o)} -> {'/'.join(f'{x:.2f}' for x in n)}  mean {sum(o)/len(o):.2f} -> {sum(n)/len(n):.2f}  cublas {c:.2f}")
    go+=math.log(sum(o)/len(o)); gn+=math.log(sum(n)/len(n)); gc+=math.log(c)
k=len(d); print(f"geomean {k}: old {math.exp(go/k):.2f} new {math.exp(gn/k):.2f} cublas {math.exp(gc/k):.2f}; all exact {ok}")
P
grep -E "programs|fold done|met |end " $OUT/timeline-run8.txt
