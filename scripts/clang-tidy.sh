#!/usr/bin/env bash
# Runs clang-tidy (the root .clang-tidy) over the project's own C++ sources
# as a build compiled them: every .cpp of BUILD_DIR/compile_commands.json
# that git tracks (so not the generated kernel table; the CUDA sources are
# left to nvcc). Any finding is an error: the exit status is 1.
#
#   scripts/clang-tidy.sh [BUILD_DIR] [-- FILE...]    default build/, every file
#
# Environment: CLANG_TIDY (default clang-tidy), JOBS (default nproc).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$repo/build"
if [[ $# -gt 0 && "$1" != "--" ]]; then
    build_dir="$(cd "$1" && pwd)"
    shift
fi
[[ "${1:-}" == "--" ]] && shift
clang_tidy="${CLANG_TIDY:-clang-tidy}"
database="$build_dir/compile_commands.json"
[[ -f "$database" ]] || { echo "clang-tidy.sh: no $database (configure the build first)" >&2; exit 2; }

if [[ $# -gt 0 ]]; then
    files=("$@")
else
    # The database's C++ files that git tracks, each once.
    mapfile -t files < <(cd "$repo" && python3 - "$database" <<'EOF'
import json, os, subprocess, sys
tracked = set(subprocess.run(["git", "ls-files", "*.cpp"], capture_output=True, text=True, check=True).stdout.split())
compiled = {os.path.relpath(os.path.join(e["directory"], e["file"])) for e in json.load(open(sys.argv[1]))}
print("\n".join(sorted(compiled & tracked)))
EOF
)
fi
start=$SECONDS
status=0
printf '%s\n' "${files[@]}" | (cd "$repo" && xargs -P "${JOBS:-$(nproc)}" -n 1 "$clang_tidy" -p "$build_dir" --quiet) ||
    status=1
echo "clang-tidy.sh: ${#files[@]} files in $((SECONDS - start)) s, $([[ $status == 0 ]] && echo clean || echo 'findings above')"
exit "$status"
