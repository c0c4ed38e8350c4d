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
one() { # file: formats it, or (check) prints it when it is not formatted
  local f=$1 style=file
  [[ -f "$f" ]] || return 0
  if [[ "$f" == *.bpf.c || "$f" == bpf/include/* ]]; then style=file:bpf/.clang-format; fi
  if [[ $mode == fix ]]; then
    clang-format --style="$style" -i "$f"
  elif ! clang-format --style="$style" "$f" | cmp -s - "$f"; then
    echo "not formatted: $f (run scripts/format.sh)"
  fi
}
export -f one
export mode
out=$(printf '%s\0' "${files[@]}" | xargs -0 -n 8 -P "$(nproc)" bash -c 'for f; do one "$f"; done' _)
[[ -z "$out" ]] || { echo "$out"; exit 1; }
