import csv,sys,collections
f=sys.argv[1]; cuts=[int(x,16) for x in sys.argv[2].split(',')]
rows=list(csv.reader(open(f)))
hdr=rows[1]; ix={h:i for i,h in enumerate(hdr)}
seen=set(); data=[]
for r in rows[2:]:
    if r[0].startswith('0x') and r[0] not in seen: seen.add(r[0]); data.append(r)
base=int(data[0][0],16)
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
def n(x):
    try: return int(x)
    except: return 0
tot=sum(n(r[2]) for r in data)
print("samples",tot,"instr",sum(n(r[5]) for r in data), "n", len(data))
reg=collections.defaultdict(lambda:[0,0,collections.Counter()])
for r in data:
    off=int(r[0],16)-base
    k=sum(off>=c for c in cuts)
    reg[k][0]+=n(r[2]); reg[k][1]+=n(r[5])
    for s in stalls: reg[k][2][s[6:]]+=n(r[ix[s]])
for k in sorted(reg):
    lo=cuts[k-1] if k else 0
    s,i,c=reg[k]
    print(f"from {lo:5x}: samples {s:5d} ({s/tot:.1%}) instr {i:9d} ({i/ (sum(v[1] for v in reg.values())):.1%}) ", {a:b for a,b in c.most_common(5)})
