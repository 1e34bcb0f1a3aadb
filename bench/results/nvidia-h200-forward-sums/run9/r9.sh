#!/bin/bash
# Session 2026-11-22e, run 9: the committed binaries (531483e): scripts/sanitize-gpu-tests.sh (memcheck, racecheck,
# initcheck, synccheck) over the "[digitcaps],[routing]" CUDA test groups.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
SANITIZER_LOG_DIR=/tmp/sanitizer-logs timeout 570 bash scripts/sanitize-gpu-tests.sh /tmp/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/sanitize.txt 2>&1
echo "rc $?" >> $OUT/sanitize.txt; cat $OUT/sanitize.txt
for f in /tmp/sanitizer-logs/*.log; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -1 | sed "s|^|$(basename $f): |"; done > $OUT/summaries.txt; cat $OUT/summaries.txt
