#!/usr/bin/env bash
# Formats the project's own C++ and CUDA sources with clang-format and the
# root .clang-format: the files git tracks (so never build/, nor the Halide
# kernels' generated headers and the kernel table, which live there).
#
#   scripts/format.sh            rewrite the files in place
#   scripts/format.sh --check    change nothing; list each file that would
#                                change with its count of changed lines, and
#                                exit 1 if any would (for CI)
#
# Environment: CLANG_FORMAT, the clang-format to run (default clang-format;
# the style was tuned with version 14).
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format}"
check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
esac

mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
if [[ "$check" == 0 ]]; then
    "$clang_format" --style=file -i "${files[@]}"
    echo "format: formatted ${#files[@]} files"
    exit 0
fi

changed_files=0
changed_lines=0
for file in "${files[@]}"; do
    # The file's lines that the formatted text replaces or drops (or, where
    # it only adds lines, the lines it adds).
    difference="$("$clang_format" --style=file "$file" | diff "$file" - || true)"
    if [[ -n "$difference" ]]; then
        lines="$(grep -c '^<' <<<"$difference" || true)"
        [[ "$lines" != 0 ]] || lines="$(grep -c '^>' <<<"$difference" || true)"
        echo "$file: $lines line(s) would change"
        changed_files=$((changed_files + 1))
        changed_lines=$((changed_lines + lines))
    fi
done
echo "format: $changed_lines line(s) in $changed_files of ${#files[@]} files would change"
[[ "$changed_files" == 0 ]]
