#!/usr/bin/env bash
# Regenerates the ELF seed corpus from elf_seed.c: a static executable, a shared object
# with and without .symtab, and a relocatable object, all with a GNU build-id note and a
# tiny page size so they stay about 1-3 KB (libFuzzer mutates small inputs much faster).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/corpus/fuzz_elf_symbols
ld="-Wl,-z,max-page-size=16 -Wl,-z,noseparate-code -Wl,--build-id -Wl,--hash-style=gnu"
gcc -Os -nostdlib -static $ld -o "$out/static-exe" "$here/elf_seed.c"
gcc -Os -shared -fPIC -nostdlib $ld -o "$out/shared.so" "$here/elf_seed.c"
strip -o "$out/shared-stripped.so" "$out/shared.so"
gcc -Os -c -o "$out/object.o" "$here/elf_seed.c"
