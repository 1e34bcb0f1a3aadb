# Mean of each metric per kernel launch shape in an ncu --metrics log (wait kernels left out).
import collections, re, sys
cur = None
data = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    if line.startswith("  ") and not line.startswith("   ") and "Context" in line:
        m = re.match(r"^  (\S+) \((\d+, \d+, \d+)\)x\((\d+, \d+, \d+)\)", line)
        cur = (m.group(1)[:32], m.group(2), m.group(3)) if m else None
        continue
    m = re.match(r"^\s+(\S+)\s+(\S+)\s+([\d.]+)$", line)
    if m and cur:
        data[cur][m.group(1).split(".")[0]].append(float(m.group(3)))
for k, v in data.items():
    print(f"{k[0]} grid ({k[1]}) block ({k[2]}): " + ", ".join(f"{n} {sum(x) / len(x):.1f}" for n, x in v.items()) +
          f" (mean of {len(next(iter(v.values())))})")
