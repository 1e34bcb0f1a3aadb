#!/usr/bin/env bash
# The main job: set up and build (scripts/setup.sh), then run every operator
# at its standard shape on the device at hand (CUDA when a device is present,
# otherwise the CPU): the capsule prediction and its gradients, the DigitCaps
# layer forward and backward (3 routing iterations) and the capsule
# convolution. Each operator's default is checked against the float64
# reference and timed beside its baseline and its peer by `halcaps bench`;
# the rows come out as one table (scripts/main_table.py).
#
#   scripts/run-main.sh                 # setup, build, run
#   SKIP_SETUP=1 scripts/run-main.sh    # an existing build/ only
#   REPEATS=3 WARMUP=1 scripts/run-main.sh   # fewer calls (noisier numbers)
#   OUT=dir scripts/run-main.sh         # keep each operator's JSON and Markdown in dir
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SKIP_SETUP:-}" ]; then bash scripts/setup.sh; fi

cli=${HALCAPS_CLI:-build/halcaps}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
"$cli" info > "$out/info.txt"
device=cpu
if grep -q '^CUDA device: ' "$out/info.txt" && ! grep -q '^CUDA device: none' "$out/info.txt"; then device=cuda; fi

# The rows of each operator: its default at the standard shape first, then
# its baseline, then its peers (the bench's naive rows and the comparisons
# docs/results.md names). The defaults are the ones the runtime picks at
# these shapes; "-" marks a role with no row (the CPU backward has no
# separate baseline).
if [ "$device" = cuda ]; then
    repeats=${REPEATS:-30}; warmup=${WARMUP:-5}
    rows=(
        "predict|mnist_b128|capsule_runs,cuda_blog_naive,cublas,cuda_staged"
        "predict_backward|mnist_b128|vectors,cuda_blog_naive,cublas,cuda_tensor"
        "digitcaps|mnist_b128|fused_split_all_vectors,cuda_naive,cuda_tensor"
        "digitcaps_backward|mnist_b128|rows_vectors,cuda_naive,cuda_tensor"
        "capsconv|seed|staged_rows,cuda_vaidya_b,cudnn,im2col_cublas,cuda_vaidya_i3"
    )
else
    repeats=${REPEATS:-9}; warmup=${WARMUP:-2}
    rows=(
        "predict|mnist_b128|cpu,naive-openmp,auto_mullapudi2016"
        "predict_backward|mnist_b128|cpu,naive-openmp,auto_mullapudi2016"
        "digitcaps|mnist_b128|cpu_lanes,stage_per_op,auto_mullapudi2016"
        "digitcaps_backward|mnist_b128|cpu,-,root_autodiff"
        "capsconv|seed|cpu,naive-openmp,auto_mullapudi2016"
    )
fi

# Keep only the implementations this build holds (cudnn needs cuDNN, the
# autoscheduled kernels a CMake option), so that a smaller build still runs.
present() {  # op implementation -> true when `halcaps info` lists it on $device
    [ "$2" = naive-openmp ] || awk -v op="$1" -v impl="$2" -v dev="$device" \
        '$1 == op && $2 == impl && $3 == dev { found = 1 } END { exit !found }' "$out/info.txt"
}

status=0
jsons=()
for row in "${rows[@]}"; do
    IFS='|' read -r op shape wanted <<< "$row"
    impls=()      # what this build holds, for the bench
    listed=()     # every position, "-" where there is no such row
    IFS=',' read -ra candidates <<< "$wanted"
    for impl in "${candidates[@]}"; do
        if [ "$impl" != - ] && present "$op" "$impl"; then impls+=("$impl"); listed+=("$impl"); else listed+=(-); fi
    done
    if [ "$op" = capsconv ]; then shape_flag=(--capsconv-shapes "$shape"); else shape_flag=(--shapes "$shape"); fi
    echo "[main] $op at $shape on $device: $(IFS=,; echo "${impls[*]}")" >&2
    if ! "$cli" bench --device "$device" --op "$op" "${shape_flag[@]}" \
            --implementations "$(IFS=,; echo "${impls[*]}")" --repeats "$repeats" --warmup "$warmup" \
            --json "$out/$op.json" --markdown "$out/$op.md" > "$out/$op.txt" 2>&1; then
        echo "[main] $op: halcaps bench failed:" >&2; tail -5 "$out/$op.txt" >&2
        status=1
    fi
    if [ -f "$out/$op.json" ]; then jsons+=("$out/$op.json:$(IFS=,; echo "${listed[*]}")"); fi
done

# On CUDA, PyTorch eager and torch.compile of the layer are its peers too
# (bench/pytorch_digitcaps.py), where torch is installed.
peers=()
python=${PYTHON:-python3}
if [ "$device" = cuda ] && "$python" -c 'import torch' 2>/dev/null; then
    echo "[main] PyTorch peers of digitcaps and digitcaps_backward at mnist_b128" >&2
    if "$python" bench/pytorch_digitcaps.py --shapes 128 --repeats "$repeats" --warmup "$warmup" --backward \
            > "$out/pytorch.jsonl" 2> "$out/pytorch.txt"; then
        peers=(--pytorch "$out/pytorch.jsonl")
    else
        echo "[main] bench/pytorch_digitcaps.py failed:" >&2; tail -5 "$out/pytorch.txt" >&2
    fi
fi

python3 scripts/main_table.py "${peers[@]}" "${jsons[@]}" || status=1
echo "[main] JSON, Markdown and terminal output of each operator: $out" >&2
exit "$status"
