# Sums ncu's warp-state samples and executed instructions of sass.csv (ncu --page source --csv --print-source sass)
# over stretches of the kernel cut at the given SASS offsets (hex, from the kernel's first instruction).
#   python3 regions.py sass.csv 13f60,18460,1a9e0,1acc0,1e480,1e7e0 "names,..."
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
data = [r for r in rows[2:] if r and r[0].startswith('0x')]
cuts = [int(x, 16) for x in sys.argv[2].split(',')]
names = sys.argv[3].split(',') if len(sys.argv) > 3 else [str(k) for k in range(len(cuts) + 1)]
def n(x):
    try:
        return int(x)
    except ValueError:
        return 0
base = int(data[0][0], 16)
samples = [0] * (len(cuts) + 1)
instructions = [0] * (len(cuts) + 1)
for r in data:
    k = sum(int(r[0], 16) - base >= c for c in cuts)
    samples[k] += n(r[2])
    instructions[k] += n(r[5])
total = sum(samples)
print(f"| stretch | samples | share | warp instructions |\n|---|---:|---:|---:|")
for name, s, i in zip(names, samples, instructions):
    print(f"| {name} | {s} | {s / total:.1%} | {i} |")
