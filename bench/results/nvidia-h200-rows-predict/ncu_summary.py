import re,sys,collections
# Sums gpu__time_duration per stage from an ncu text log (halcaps kernels named _kernel_<stage>_s0...).
cur=None; rows=[]
for line in open(sys.argv[1]):
    m=re.match(r'\s*(_kernel_\S+|\S+_kernel\S*|wait_kernel\S*)\s*\(',line)
    m=m or re.match(r'\s*(\S*kernel\S*)\s+\(\d+, \d+, \d+\)x',line)
    if m: cur=m.group(1); continue
    m=re.search(r'gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)',line)
    if m and cur:
        v=float(m.group(2).replace(',','')); v = v/1000 if m.group(1)=='ns' else (v*1000 if m.group(1)=='ms' else v)
        extra={}
        rows.append([cur,v,{}])
    for key in ['launch__registers_per_thread','l1tex__throughput','dram__throughput']:
        m=re.search(key+r'\S*\s+\S+\s+([\d.,]+)',line)
        if m and rows and cur: rows[-1][2][key]=m.group(1)
def stage(n):
    n=re.sub(r'^_kernel_','',n)
    n=re.sub(r'^(it\d|bw\d)_','',n)
    n=re.split(r'_global_wrapper|_s0_|_wrapper',n)[0]
    return n
if len(sys.argv)>2 and sys.argv[2]=='-v':
    for n,v,e in rows: print(f'{n[:70]:72s} {v:8.1f} {e}')
agg=collections.OrderedDict()
calls=max(1,sum(1 for n,v,e in rows if n.startswith('_kernel_grad_b0_s0')))
print('calls',calls)
for n,v,e in rows:
    if 'wait_kernel' in n: continue
    s=stage(n); a=agg.setdefault(s,[0,0.0]); a[0]+=1/calls; a[1]+=v/calls
tot=0
for s,(c,v) in sorted(agg.items(), key=lambda x:-x[1][1]):
    print(f'{s:28s} kernels={c:<3.0f} {v:8.1f} us'); tot+=v
print(f'total {tot:.1f} us per call (ncu clocks)')
