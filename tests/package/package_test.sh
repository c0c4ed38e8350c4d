#!/usr/bin/env bash
# The Debian package (cmake/LoupePackage.cmake), as ctest's package_* tests run it:
#   package_test.sh BUILD SRC build          make the .deb into BUILD/package-test
#   package_test.sh BUILD SRC contents       what `cmake --install` installs, all of it; Depends
#   package_test.sh BUILD SRC unit           loupe.service: systemd-analyze verify, clean
#   package_test.sh BUILD SRC guest KERNEL...  dpkg -i in a scripts/vmtest.sh guest, then the
#                                            agent as the unit runs it (tests/package/in_guest.sh)
# The later cases use the .deb the build case made. Exit 77 = skipped (the reason is printed).
set -uo pipefail
BUILD=$(realpath "${1:?usage: package_test.sh BUILD SRC CASE}")
SRC=$(realpath "${2:?usage: package_test.sh BUILD SRC CASE}")
CASE=${3:?usage: package_test.sh BUILD SRC CASE}
# Under the build tree, not /tmp: a guest sees this machine's files, but its /tmp is its own.
OUT=$BUILD/package-test
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

the_deb() {
  local debs=("$OUT"/loupe_*_"$(dpkg --print-architecture)".deb)
  [[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one .deb in $OUT (package_build makes it): ${debs[*]}"
  echo "${debs[0]}"
}

# Extracts the package once per case into a fresh directory; prints the directory.
extract() {
  local dir
  dir=$(mktemp -d "$OUT/extract.XXXXXX")
  dpkg-deb -x "$1" "$dir" || fail "dpkg-deb -x $1"
  echo "$dir"
}

case_build() {
  command -v dpkg-deb >/dev/null || skip "dpkg-deb not found (Debian package dpkg)"
  command -v dpkg-shlibdeps >/dev/null || skip "dpkg-shlibdeps not found (Debian package dpkg-dev)"
  rm -rf "$OUT" && mkdir -p "$OUT"
  # What `cmake --build build --target package` runs, with the output here instead of build/.
  cpack --config "$BUILD/CPackConfig.cmake" -B "$OUT" >"$OUT/cpack.log" 2>&1 ||
    { cat "$OUT/cpack.log"; fail "cpack"; }
  local deb version
  deb=$(the_deb)
  version=$("$BUILD/bin/loupe" --version | awk '{print $2}')
  [[ $(basename "$deb") == "loupe_${version}_$(dpkg --print-architecture).deb" ]] ||
    fail "$(basename "$deb") is not loupe_<loupe --version>_<arch>.deb (version $version)"
  [[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "Version: $(dpkg-deb -f "$deb" Version)"
  echo "built $(basename "$deb"): $(stat -c %s "$deb") bytes, installed size $(dpkg-deb -f "$deb" Installed-Size) KiB"
}

case_contents() {
  local deb x staging
  deb=$(the_deb)
  x=$(extract "$deb")
  # Everything `cmake --install` installs, and nothing else.
  staging=$(mktemp -d "$OUT/staging.XXXXXX")
  DESTDIR=$staging cmake --install "$BUILD" --prefix /usr >"$staging.log" 2>&1 ||
    { cat "$staging.log"; fail "cmake --install"; }
  diff <(cd "$staging" && find . ! -type d | sort) <(cd "$x" && find . ! -type d | sort) >"$OUT/diff" ||
    fail "the package differs from cmake --install (< install only, > package only):
$(cat "$OUT/diff")"
  rm -rf "$staging" "$staging.log"

  # And by name, from the source tree: every plugin and sink folder, every profile, every
  # SDK header, the CMake package, the docs, the unit.
  local want=(usr/bin/loupe usr/lib/cmake/loupe/loupeConfig.cmake usr/lib/cmake/loupe/loupeTargets.cmake
    usr/lib/cmake/loupe/LoupePlugin.cmake usr/share/doc/loupe/README.md usr/share/doc/loupe/docs/cli.md
    usr/lib/systemd/system/loupe.service usr/share/loupe/profiles/agent.toml)
  local d f
  for d in "$SRC"/plugins/*/ "$SRC"/sinks/*/ "$SRC"/sdk/examples/syscount/; do
    [[ -f $d/CMakeLists.txt ]] && want+=("usr/lib/loupe/plugins/loupe-$(basename "$d").so")
  done
  for f in "$SRC"/profiles/*.toml; do want+=("usr/share/loupe/profiles/$(basename "$f")"); done
  while read -r f; do want+=("usr/include/${f#"$SRC/sdk/include/"}"); done < <(find "$SRC/sdk/include" -type f)
  for f in "${want[@]}"; do [[ -f $x/$f ]] || fail "the package has no /$f"; done
  echo "contents: $(cd "$x" && find . ! -type d | wc -l) files; the ${#want[@]} named ones present"

  # Depends names the package of every library a binary of the package needs (dpkg-shlibdeps
  # made the list; this checks it against the binaries, package by package).
  local depends depends_names lib path pkg checked=0
  depends=$(dpkg-deb -f "$deb" Depends)
  [[ -n $depends ]] || fail "no Depends"
  # One package name a line: "a (>= 1), b | c" gives a, b, c.
  depends_names=$(tr ',|' '\n\n' <<<"$depends" | sed 's/(.*//; s/ //g' | grep -v '^$')
  while read -r lib; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
    [[ -n $path ]] || path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
    [[ -n $path ]] || fail "$lib, needed by the package, is not on this machine"
    pkg=$(dpkg -S "$(realpath "$path")" 2>/dev/null | head -n1 | cut -d: -f1)
    [[ -n $pkg ]] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n1 | cut -d: -f1)
    [[ -n $pkg ]] || fail "no Debian package owns $path ($lib)"
    # The package by name, or a name it provides (libspdlog1.10's shlibs file asks for
    # libspdlog1.10-fmt9, which it provides).
    local names=("$pkg") p ok=""
    IFS=', ' read -r -a provides <<<"$(dpkg-query -W -f='${Provides}' "$pkg" | sed 's/ ([^)]*)//g')"
    names+=("${provides[@]}")
    for p in "${names[@]}"; do
      [[ -n $p ]] && grep -qxF "$p" <<<"$depends_names" && ok=yes
    done
    [[ -n $ok ]] || fail "Depends lacks ${names[*]} (for $lib): $depends"
    checked=$((checked + 1))
  done < <(find "$x" -type f \( -perm -u+x -o -name '*.so' \) -exec sh -c \
    'readelf -d "$1" 2>/dev/null | sed -n "s/.*(NEEDED).*\[\(.*\)\]/\1/p"' _ {} \; | sort -u)
  [[ $checked -gt 0 ]] || fail "no NEEDED library found in the package's binaries"
  echo "Depends: $depends"
  echo "covers all $checked libraries the package's binaries need"
  rm -rf "$x"
}

case_unit() {
  local deb x unit exec copy out
  deb=$(the_deb)
  x=$(extract "$deb")
  unit=$x/usr/lib/systemd/system/loupe.service
  exec=$(sed -n 's/^ExecStart=//p' "$unit")
  # The unit runs the package's own loupe and profile.
  [[ $exec == "/usr/bin/loupe run agent "* ]] || fail "ExecStart=$exec"
  [[ -x $x/usr/bin/loupe && -f $x/usr/share/loupe/profiles/agent.toml ]] || fail "ExecStart's files"
  grep -q '^StateDirectory=loupe$' "$unit" || fail "no StateDirectory=loupe"
  grep -q '^ProtectSystem=strict$' "$unit" || fail "not ProtectSystem=strict"
  command -v systemd-analyze >/dev/null ||
    skip "systemd-analyze not found (Debian package systemd): the unit is not verified"
  # verify checks that ExecStart exists: the copy points at the extracted binary.
  copy=$OUT/loupe.service
  sed "s|^ExecStart=/usr/bin/loupe |ExecStart=$x/usr/bin/loupe |" "$unit" >"$copy"
  # verify exits 0 on unknown keys and bad values, printing them: any output fails.
  out=$(systemd-analyze verify "$copy" 2>&1) || fail "systemd-analyze verify: $out"
  [[ -z $out ]] || fail "systemd-analyze verify printed: $out"
  echo "systemd-analyze verify: clean"
  systemd-analyze security --offline=yes "$copy" 2>/dev/null | tail -n 1
  rm -rf "$x" "$copy"
}

# One guest per kernel named, all at once (one TCG core each, as the matrix runs them): the
# host's other tests wait for this one, so its length is the longest guest's, not their sum.
case_guest() {
  [[ $# -gt 0 ]] || fail "guest KERNEL..."
  local deb
  deb=$(the_deb)
  command -v qemu-system-x86_64 >/dev/null ||
    skip "qemu-system-x86_64 not found (scripts/install-deps.sh installs it): no guest install"
  # The script beside the .deb, run from there: a guest sees a checkout under /tmp (CI's)
  # only through its working directory, which vmtest.sh keeps visible over the scratch /tmp.
  local stage
  stage=$(dirname "$deb")
  cp "$SRC/tests/package/in_guest.sh" "$stage/in_guest.sh"
  local -A pids
  local kernel
  for kernel in "$@"; do
    (cd "$stage" && LOUPE_VMTEST_TIMEOUT=${LOUPE_VMTEST_TIMEOUT:-600} "$SRC/scripts/vmtest.sh" \
      "$kernel" bash "$stage/in_guest.sh" "$deb") >"$OUT/guest-$kernel.log" 2>&1 &
    pids[$kernel]=$!
  done
  local failed=()
  for kernel in "$@"; do
    local rc=0
    wait "${pids[$kernel]}" || rc=$?
    echo "===== the package in the $kernel guest: exit $rc ====="
    # The console's boot lines are noise; the script's own lines say what happened.
    grep -v '^\[ *[0-9.]*\]' "$OUT/guest-$kernel.log"
    [[ $rc -eq 0 ]] || failed+=("$kernel (exit $rc)")
  done
  [[ ${#failed[@]} -eq 0 ]] || fail "the package in the guest(s): ${failed[*]}"
}

"case_$CASE" "${@:4}"
