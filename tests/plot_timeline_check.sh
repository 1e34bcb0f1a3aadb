#!/usr/bin/env bash
# bench/studies/plot_timeline.py draws records in the timeline probe's CSV form, and a
# missing or empty file is one error line and exit 2. Skipped (77) where the
# Python given has no matplotlib.
set -u
python=$1 plot=$2 work=$3
"$python" -c "import matplotlib" 2>/dev/null || { echo "SKIPPED: no matplotlib for $python"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
header=launch,kernel,tag,sm,block,entered_ns,waited_ns,first_step_ns,steps_done_ns,ended_ns
{
    echo "$header"
    echo "0,0,0,0,0,0,1000,2000,9000,11000"     # a first-pass block on SM 0
    echo "0,0,0,1,1,50,1100,2100,9100,11500"    # one on SM 1
    echo "1,3,0,0,0,3000,12000,13500,13500,14000"  # a squash block waiting on them
} > "$work/timeline.csv"
"$python" "$plot" "$work/timeline.csv" -o "$work/timeline.png" || { echo "plot_timeline.py failed"; exit 1; }
[ -s "$work/timeline.png" ] || { echo "no PNG written"; exit 1; }
echo "$header" > "$work/empty.csv"
for bad in missing.csv empty.csv; do
    "$python" "$plot" "$work/$bad" -o "$work/x.png" 2> "$work/err.txt"
    status=$?
    lines=$(wc -l < "$work/err.txt")
    if [ "$status" -ne 2 ] || [ "$lines" -ne 1 ]; then
        echo "$bad: exit $status, $lines stderr lines"; cat "$work/err.txt"; exit 1
    fi
done
echo "plot_timeline.py: drew $work/timeline.png; a missing or empty file: exit 2, one line"
