#!/bin/sh
# Proves a program can embed the installed engine:
#   1. install the `sdk` and `core` components of a configured loupe build into a fresh prefix,
#   2. configure + build a copy of core/examples/embed against it
#      (find_package(loupe COMPONENTS core), loupe::core),
#   3. as root, run it on a profile given as text (a CPU-sampling session with the build's
#      plugins) and check its callback counted stack records; otherwise stop after 2.
# Usage: out_of_tree.sh <loupe-build-dir> <loupe-source-dir> [plugin-dir]
set -eu

build=${1:?usage: out_of_tree.sh <loupe-build-dir> <loupe-source-dir>}
src=${2:?usage: out_of_tree.sh <loupe-build-dir> <loupe-source-dir> [plugin-dir]}
plugins=${3:-$build/lib/loupe/plugins}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loupe-embed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

fail() {
	echo "embed_out_of_tree: FAIL: $*" >&2
	exit 1
}

for c in sdk core; do
	cmake --install "$build" --prefix "$tmp/prefix" --component $c >>"$tmp/install.log" 2>&1 ||
		{ cat "$tmp/install.log" >&2; fail "cmake --install --component $c"; }
done

# A copy, so nothing can resolve relative to the loupe source tree.
cp -r "$src/core/examples/embed" "$tmp/src"
generator=
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
# shellcheck disable=SC2086
cmake -S "$tmp/src" -B "$tmp/build" $generator -DCMAKE_PREFIX_PATH="$tmp/prefix" \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$tmp/configure.log" 2>&1 ||
	{ cat "$tmp/configure.log" >&2; fail "configure against the installed engine"; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 ||
	{ cat "$tmp/build.log" >&2; fail "build against the installed engine"; }
if grep -q -- "$src/core/include\|$src/sdk/include" "$tmp/build/build.ninja" "$tmp/build/CMakeCache.txt" 2>/dev/null; then
	fail "the out-of-tree build refers to the loupe source tree"
fi
exe="$tmp/build/embed_example"
ldd "$exe" | grep -q "$tmp/prefix/lib/libloupe.so" || fail "embed_example does not load the installed libloupe.so"

if [ "$(id -u)" -ne 0 ]; then
	echo "embed_out_of_tree: built; not run (a session needs root or CAP_BPF + CAP_PERFMON)"
	exit 0
fi
# Something on the CPU for the system-wide sampler to see (an idle machine gave 0-13 stacks).
sh -c 'while :; do :; done' &
spin=$!
trap 'kill $spin 2>/dev/null || true; rm -rf "$tmp"' EXIT INT TERM
out=$(LOUPE_PLUGIN_PATH="$plugins" "$exe" "[session]
duration = 1
output_dir = \"$tmp/out\"
[[plugins]]
name = \"cpusample\"
frequency = 99
") || fail "embed_example exited $?: $out"
kill $spin
echo "$out"
stacks=$(echo "$out" | sed -n 's/^records: \([0-9]*\) stack.*/\1/p')
[ "${stacks:-0}" -gt 0 ] || fail "the callback got no stack records: $out"
echo "embed_out_of_tree: OK (the installed engine ran a session in process: $stacks stack records)"
