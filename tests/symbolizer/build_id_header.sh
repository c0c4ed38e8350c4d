#!/bin/sh
# build_id_header.sh ELF OUT: OUT defines DEBUGINFOD_BUILD_ID, the GNU build-id of ELF.
set -e
id=$(readelf -n "$1" | awk '/Build ID/ {print $3}')
[ -n "$id" ] || { echo "$1 has no build-id" >&2; exit 1; }
printf '#define DEBUGINFOD_BUILD_ID "%s"\n' "$id" >"$2"
