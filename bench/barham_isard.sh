#!/usr/bin/env bash
# Measures everything bench/barham_isard_table.py needs on one device and
# writes the table:
#   bench/barham_isard.sh cpu  OUT_DIR [REPEATS]   # on the build machine
#   bench/barham_isard.sh cuda OUT_DIR [REPEATS]   # on the GPU machine
# Run from the repository root after the build (build/halcaps,
# build/halcaps_generators); for the auto_adams2019 / auto_anderson2021 run
# times the build needs -DHALCAPS_BEAM_SEARCH_KERNELS=ON.
#   1. compile times of the hand-written C++ and CUDA files: the build's own
#      compile command, re-run into OUT_DIR (ninja -t commands);
#   2. `halcaps explore build` per operator: the space's points (if it has
#      a space), the named schedules and every autoscheduler for the device,
#      each compile timed; `explore run` where explore can run the operator;
#   3. `halcaps bench --device DEVICE` (MNIST b128), and on the CPU the naive
#      loops again under OMP_NUM_THREADS=1 (Barham & Isard's plain "gcc" row);
#   4. the table: OUT_DIR/barham-isard-DEVICE.md.
# Nothing here needs a GPU for the CPU table. The GPU machine has no Halide
# and no compiler, so there the work is split with STEP:
#   STEP=build bench/barham_isard.sh cuda OUT_DIR   # build machine: 1, and 2's builds
#   STEP=run   bench/barham_isard.sh cuda OUT_DIR   # GPU machine: 2's runs, 3, 4
# (the points are self-contained shared objects that travel in OUT_DIR).
# STEP=all (the default) does everything on one machine. With REUSE=1,
# explore builds and runs and bench files already in OUT_DIR are kept (to
# finish an interrupted run).
set -euo pipefail
device=${1:?usage: bench/barham_isard.sh cpu|cuda OUT_DIR [REPEATS]}
out=${2:?usage: bench/barham_isard.sh cpu|cuda OUT_DIR [REPEATS]}
repeats=${3:-20}
step=${STEP:-all}
case "$step" in all | build | run) ;; *) echo "STEP must be all, build or run" >&2; exit 2 ;; esac
building() { [ "$step" != run ]; }
running() { [ "$step" != build ]; }
halcaps=${HALCAPS:-build/halcaps}  # another build of the tool, e.g. one carried to the GPU machine
python=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { printf '[barham_isard] %s\n' "$*"; }

# --- 1. compile times of the C++ / CUDA files ------------------------------
# The last command ninja would run for an object, with its output moved to
# OUT_DIR; prints the wall seconds.
time_compile() {
    local object=$1 command
    command=$(ninja -C build -t commands "$object" | tail -n 1)
    command=${command//" -o $object"/" -o $out/timed.o"}
    command=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -MD -MT [^ ]+ -MF [^ ]+//' <<< "$command")
    local t0 t1
    t0=$(date +%s%N)
    (cd build && eval "$command") >/dev/null
    t1=$(date +%s%N)
    awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f\n", ns / 1e9 }'
}
if building; then
{
    echo "{"
    echo "  \"naive-openmp\": $(time_compile CMakeFiles/halcaps_reference.dir/reference/predict_naive_openmp.cpp.o)"
    if [ "$device" = cuda ]; then
        t=$(time_compile CMakeFiles/halcaps_cuda_kernels.dir/reference/cuda/predict_cuda.cu.o)
        for name in cuda_blog_naive cuda_tuned cuda_fused; do echo "  , \"$name\": $t"; done
        echo "  , \"cuda_naive\": $(time_compile CMakeFiles/halcaps_cuda_kernels.dir/reference/cuda/digitcaps_cuda.cu.o)"
        t=$(time_compile CMakeFiles/halcaps_cuda_kernels.dir/reference/cuda/capsconv_cuda.cu.o)
        for name in cuda_vaidya_b cuda_vaidya_i1 cuda_vaidya_i2 cuda_vaidya_i3; do echo "  , \"$name\": $t"; done
    fi
    echo "}"
} > "$out/compile_times.json"
rm -f "$out/timed.o"
log "compile times of the C++/CUDA files: $(tr -d '\n' < "$out/compile_times.json")"
fi

# --- 2. explore ------------------------------------------------------------
hand=cpu
[ "$device" = cuda ] && hand=tuned
explore_dirs=()
explore() {  # explore NAME ARGS...: build the rows (STEP build/all), run them (run/all)
    local name=$1 dir="$out/explore-$1" shape=mnist_b128
    shift
    explore_dirs+=(--explore "$dir")
    [ "$name" = capsconv ] && shape=layer
    if building; then
        if [ "${REUSE:-0}" = 1 ] && [ -f "$dir/points.json" ]; then
            log "explore build $name: kept"
        else
            log "explore build $name: $*"
            "$halcaps" explore build "$@" --out "$dir" | tail -n 2
        fi
    fi
    if running; then
        if [ "${REUSE:-0}" = 1 ] && [ -f "$dir/results.json" ]; then
            log "explore run $name: kept"
        else
            log "explore run $name ($shape)"
            "$halcaps" explore run "$dir" --shape "$shape" --repeats "$repeats" | tail -n 3
        fi
    fi
}
space() { echo "schedules/spaces/$1_$device.space"; }
for op in predict predict_grad_input predict_grad_weight; do
    if [ -f "$(space $op)" ]; then
        explore "$op" --space "$(space $op)" --schedule "$hand" --autoscheduler all
    else
        explore "$op" --op "$op" --device "$device" --schedule "$hand" --autoscheduler all
    fi
done
# The other operators' hand-tuned schedules and autoscheduled rows: cpu on
# the CPU; on CUDA the layer's stage_per_kernel (and the fused layer's space
# with its named points), capsconv's tuned and tuned_co4.
if [ "$device" = cuda ]; then
    explore digitcaps --op digitcaps --device cuda --schedule stage_per_kernel --autoscheduler all
    explore digitcaps_fused --space "$(space digitcaps_fused)" --schedule fused --schedule fused_chunk8
    explore capsconv --op capsconv --device cuda --schedule tuned --schedule tuned_co4 --autoscheduler all
else
    explore digitcaps --op digitcaps --device cpu --schedule cpu --autoscheduler all
    explore capsconv --op capsconv --device cpu --schedule cpu --schedule cpu_co4 --autoscheduler all
fi
running || { log "STEP=build: done; now STEP=run on the device"; exit 0; }

# --- 3. bench --------------------------------------------------------------
if [ "${REUSE:-0}" = 1 ] && [ -f "$out/bench-$device.json" ]; then
    log "bench on $device: kept"
else
    log "bench on $device"
    "$halcaps" bench --device "$device" --shapes mnist_b128 --repeats "$repeats" --json "$out/bench-$device.json" \
    --markdown "$out/bench-$device.md" | tail -n 40
fi
one_thread=()
if [ "$device" = cpu ]; then
    [ "${REUSE:-0}" = 1 ] && [ -f "$out/bench-cpu-1thread.json" ] || OMP_NUM_THREADS=1 "$halcaps" bench --device cpu --shapes mnist_b128 --implementations naive-openmp \
        --repeats 3 --warmup 1 --json "$out/bench-cpu-1thread.json" | tail -n 5
    log "bench: the naive loops on one thread: $out/bench-cpu-1thread.json"
    one_thread=(--bench-1thread "$out/bench-cpu-1thread.json")
fi

# --- 4. the table ----------------------------------------------------------
"$python" bench/barham_isard_table.py --bench "$out/bench-$device.json" "${one_thread[@]}" "${explore_dirs[@]}" \
    --compile-times "$out/compile_times.json" --shape mnist_b128 --shape layer --shape seed \
    -o "$out/barham-isard-$device.md"
