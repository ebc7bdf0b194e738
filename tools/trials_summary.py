import csv,sys,collections
rows=list(csv.DictReader(open(sys.argv[1])))
best=collections.defaultdict(dict)
for r in rows:
    if r['us']=='' : continue
    key=(r['m'],r['n'],r['k']); kern=r['kernel']; us=float(r['us'])
    if kern not in best[key] or us<best[key][kern][0]:
        best[key][kern]=(us,'%sx%s s%s w%s st%s b%s'%(r['block_m'],r['block_n'],r['split_k'],r['num_warps'],r['num_stages'],r['blocks_per_step']))
for key,d in best.items():
    print('x'.join(key), '  '.join('%s %.2f (%s)'%(k,v[0],v[1]) for k,v in sorted(d.items(), key=lambda kv: kv[1][0])))
print('rejected', sum(1 for r in rows if r['passed']!='True'))
