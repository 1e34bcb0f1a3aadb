#!/usr/bin/env bash
# What ptxas made of the kernels in a CUDA object or binary, read on the
# build machine (no GPU needed): registers and stack per kernel, and for the
# kernels whose mangled names match a pattern, how many of each SASS opcode
# they hold, or their whole listing.
#
#   scripts/sass.sh FILE                    # registers and stack, every kernel
#   scripts/sass.sh FILE PATTERN            # and each matching kernel's opcode counts
#   scripts/sass.sh FILE PATTERN --listing  # and each matching kernel's SASS
#
# FILE: an object (build/CMakeFiles/halcaps_cuda_kernels.dir/reference/cuda/
# digitcaps_tensor_cores.cu.o) or a linked binary. PATTERN: an extended
# regular expression (grep -E) over the mangled names, for instance
# 'pass_kernelINS2_7VariantILi10ELi2ELi1EEELi1E' for the MNIST agreement
# passes.
#
# The CUDA toolkit on the build machine has no cuobjdump or nvdisasm. On
# first use this installs NVIDIA's wheels of the two (pinned below, about 6
# MB) into .venv (scripts/setup.sh makes it).
set -euo pipefail
file=${1:?usage: scripts/sass.sh FILE [PATTERN [--listing]]}
pattern=${2-}
listing=${3-}
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
[ -x "$venv/bin/pip" ] || { echo "no $venv: run scripts/setup.sh first" >&2; exit 2; }
[ -f "$file" ] || { echo "no such file: $file" >&2; exit 2; }
# Where the wheels put the two programs: the venv's own site-packages.
bin="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/bin"
if [ ! -f "$bin/cuobjdump" ] || [ ! -f "$bin/nvdisasm" ]; then
    "$venv/bin/pip" install --quiet nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37 >&2
fi
chmod +x "$bin/cuobjdump" "$bin/nvdisasm"
export PATH="$bin:$PATH"

# One line a kernel: registers, stack bytes, mangled name.
usage=$(cuobjdump --dump-resource-usage "$file" 2>/dev/null |
    awk '/Function / {name=$2; sub(":$", "", name)} /REG:/ {
        match($0, /REG:[0-9]+/); reg=substr($0, RSTART + 4, RLENGTH - 4);
        match($0, /STACK:[0-9]+/); stack=substr($0, RSTART + 6, RLENGTH - 6);
        print reg, stack, name}')
[ -n "$usage" ] || { echo "no kernels in $file" >&2; exit 1; }
if [ -n "$pattern" ]; then
    usage=$(grep -E -- "$pattern" <<< "$usage" || true)
    [ -n "$usage" ] || { echo "no kernel in $file matches $pattern" >&2; exit 1; }
fi
echo "registers stack kernel"
sort -k3 <<< "$usage"
[ -n "$pattern" ] || exit 0

while read -r _ _ name; do
    sass=$(cuobjdump -sass -fun "$name" "$file" 2>/dev/null | grep -E '^\s+/\*[0-9a-f]{4,}\*/')
    echo
    echo "== $name: $(wc -l <<< "$sass") instructions"
    if [ "$listing" = --listing ]; then
        echo "$sass"
    else
        # The opcode: the first word after the address that is not a predicate.
        awk '{op=$2; if (op ~ /^@/) op=$3; sub(/;$/, "", op); print op}' <<< "$sass" | sort | uniq -c | sort -rn
    fi
done <<< "$usage"
