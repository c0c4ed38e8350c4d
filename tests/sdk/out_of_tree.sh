#!/bin/sh
# Proves the installed SDK is enough to build a plugin out of tree:
#   1. install the `sdk` component of a configured loupe build into a fresh prefix,
#   2. configure + build a copy of sdk/examples/syscount against it (find_package(loupe)),
#   3. check the plugin exports exactly one dynamic symbol, loupe_plugin_entry.
# Usage: out_of_tree.sh <loupe-build-dir> <loupe-source-dir>
set -eu

build=${1:?usage: out_of_tree.sh <loupe-build-dir> <loupe-source-dir>}
src=${2:?usage: out_of_tree.sh <loupe-build-dir> <loupe-source-dir>}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loupe-oot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

fail() {
	echo "sdk_out_of_tree_build: FAIL: $*" >&2
	exit 1
}

cmake --install "$build" --prefix "$tmp/prefix" --component sdk >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "cmake --install --component sdk"; }
test -f "$tmp/prefix/lib/cmake/loupe/loupeConfig.cmake" ||
	test -n "$(find "$tmp/prefix" -name loupeConfig.cmake)" || fail "no loupeConfig.cmake installed"

# A copy, so nothing can resolve relative to the loupe source tree.
cp -r "$src/sdk/examples/syscount" "$tmp/src"
rm -rf "$tmp/src/build"

generator=
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
# shellcheck disable=SC2086
cmake -S "$tmp/src" -B "$tmp/build" $generator -DCMAKE_PREFIX_PATH="$tmp/prefix" \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$tmp/configure.log" 2>&1 ||
	{ cat "$tmp/configure.log" >&2; fail "configure against the installed SDK"; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 ||
	{ cat "$tmp/build.log" >&2; fail "build against the installed SDK"; }

so="$tmp/build/loupe-syscount.so"
test -f "$so" || fail "expected $so"

# Nothing from the loupe tree may leak into the out-of-tree build.
if grep -q -- "$src/sdk/include\|$src/bpf/include" "$tmp/build/build.ninja" "$tmp/build/CMakeCache.txt" 2>/dev/null; then
	fail "the out-of-tree build refers to the loupe source tree"
fi

syms=$(nm -D --defined-only "$so" | awk '{print $NF}')
if [ "$syms" != "loupe_plugin_entry" ]; then
	echo "exported symbols:" >&2
	echo "$syms" >&2
	fail "$so must export exactly one dynamic symbol, loupe_plugin_entry"
fi
echo "sdk_out_of_tree_build: OK ($so exports only loupe_plugin_entry)"
