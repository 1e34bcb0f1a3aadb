#!/usr/bin/env bash
# Run 2: the timeline with each block's record slot taken as it enters (A),
# and the same with the squash kernel's loads all in flight at once (B: 8
# sums a thread, where A keeps 4), alternating A, B, A, B.
# Binaries in .gpu/ (halcaps_digitcaps_timeline = A, halcaps_digitcaps_timeline_b = B).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-timeline/run2}
mkdir -p "$out" /tmp/bin /tmp/csv
for name in halcaps_digitcaps_timeline halcaps_digitcaps_timeline_b; do
    xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 100 /tmp/bin/halcaps_digitcaps_timeline --csv /tmp/csv/timeline 32 128 256 512 > "$out/probe_a1.txt" 2>&1
echo "rc $?" >> "$out/probe_a1.txt"; cat "$out/probe_a1.txt"
tar -C /tmp/csv -cJf "$out/timeline_csv.tar.xz" .
for round in 1 2; do
    if [ $round = 2 ]; then
        timeout 60 /tmp/bin/halcaps_digitcaps_timeline 128 512 > "$out/probe_a2.txt" 2>&1
        echo "rc $?" >> "$out/probe_a2.txt"; grep -E "^call|^batch|rc " "$out/probe_a2.txt"
    fi
    timeout 60 /tmp/bin/halcaps_digitcaps_timeline_b 128 512 > "$out/probe_b$round.txt" 2>&1
    echo "rc $?" >> "$out/probe_b$round.txt"; cat "$out/probe_b$round.txt"
done
