#!/usr/bin/env bash
# bench/plot_bench.py draws a `halcaps bench --json` file with refused rows,
# and a bad input is one error line and exit 2. Skipped (77) where the
# Python given has no matplotlib.
set -u
python=$1 cli=$2 plot=$3 work=$4
"$python" -c "import matplotlib" 2>/dev/null || { echo "SKIPPED: no matplotlib for $python"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
"$cli" bench --device cpu --op capsconv --capsconv-shapes 2:9:7:3:3:2:2:1 --repeats 1 --warmup 0 \
    --json "$work/bench.json" > /dev/null || { echo "halcaps bench failed"; exit 1; }
"$python" "$plot" "$work/bench.json" -o "$work/bench.png" --log || { echo "plot_bench.py failed"; exit 1; }
[ -s "$work/bench.png" ] || { echo "no PNG written"; exit 1; }
"$python" "$plot" "$work/missing.json" -o "$work/x.png" 2> "$work/err.txt"
status=$?
lines=$(wc -l < "$work/err.txt")
if [ "$status" -ne 2 ] || [ "$lines" -ne 1 ]; then
    echo "a missing file: exit $status, $lines stderr lines"; cat "$work/err.txt"; exit 1
fi
echo "plot_bench.py: drew $work/bench.png; a missing file: exit 2, one line"
