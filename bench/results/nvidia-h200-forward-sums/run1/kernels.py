import re,sys,collections
# Per-kernel mean gpu__time_duration from an ncu text log; calls = launches of the kernel matching argv[2].
cur=None; rows=[]
for line in open(sys.argv[1]):
    m=re.match(r'\s*(\S*kernel\S*)\s+\(\d+, \d+, \d+\)x',line) or re.match(r'\s*(_kernel_\S+|\S+_kernel\S*)\s*\(',line)
    if m: cur=m.group(1); continue
    m=re.search(r'gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)',line)
    if m and cur:
        v=float(m.group(2).replace(',','')); v = v/1000 if m.group(1)=='ns' else (v*1000 if m.group(1)=='ms' else v)
        rows.append((cur,v))
calls=max(1,sum(1 for n,v in rows if re.search(sys.argv[2],n)))
agg=collections.OrderedDict()
for n,v in rows:
    if 'wait_kernel' in n: continue
    k=re.split(r'_s0_',re.sub(r'^_kernel_','',n))[0]
    a=agg.setdefault(k,[0,0.0]); a[0]+=1; a[1]+=v
print('calls',calls); tot=0
for k,(c,v) in sorted(agg.items(), key=lambda x:-x[1][1]):
    print(f'{k[:60]:62s} x{c/calls:<4.1f} {v/calls:8.1f} us'); tot+=v/calls
print(f'total {tot:.1f} us per call')
