#!/usr/bin/env bash
# Formats the tree (or, with --check, lists what is not formatted and fails).
# C++ and user-side C follow .clang-format; BPF C (*.bpf.c, bpf/include) follows the
# kernel style of bpf/.clang-format. Generated and vendored files are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=fix
[[ "${1:-}" == "--check" ]] && mode=check
command -v clang-format >/dev/null || { echo "format: clang-format is not installed (Debian package clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' | grep -v -e '^bpf/vmlinux/' -e '/corpus/' -e '/regressions/')
bad=0
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  style=file
  if [[ "$f" == *.bpf.c || "$f" == bpf/include/* ]]; then style=file:bpf/.clang-format; fi
  if [[ $mode == fix ]]; then
    clang-format --style="$style" -i "$f"
  elif ! clang-format --style="$style" "$f" | cmp -s - "$f"; then
    echo "not formatted: $f (run scripts/format.sh)"
    bad=1
  fi
done
exit $bad
