#!/usr/bin/env python3
# One header-guard scheme for the engine and its libraries: LOUPE_ and the header's path
# from its library's include root, upper case ("core/src/session/health_report.hpp" ->
# LOUPE_SESSION_HEALTH_REPORT_HPP, "unwind/unwind_tables.hpp" -> LOUPE_UNWIND_UNWIND_TABLES_HPP),
# so a header's guard says where it lives and two never collide.
#
#   scripts/check-header-guards.py          # exit 1 and one line per header that differs
#   scripts/check-header-guards.py --fix    # rewrite them
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# Where headers are included from: the path after the prefix names the guard.
ROOTS = [("core/src/", ""), ("unwind/", "unwind/"), ("runtimes/", "runtimes/"), ("cli/", "cli/")]
GUARD = re.compile(r"^#ifndef (\w+)\n#define (\w+)\n", re.M)


def expected(path):
    for prefix, keep in ROOTS:
        if path.startswith(prefix):
            rel = keep + path[len(prefix):]
            return "LOUPE_" + re.sub(r"[^A-Za-z0-9]", "_", rel).upper()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fix", action="store_true")
    a = ap.parse_args()
    files = subprocess.run(["git", "ls-files", "*.hpp"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    bad = 0
    for path in files:
        want = expected(path)
        if not want:
            continue
        full = os.path.join(ROOT, path)
        text = open(full, encoding="utf-8").read()
        m = GUARD.search(text)
        if not m or m.group(1) != m.group(2):
            print(f"{path}: no #ifndef/#define guard pair")
            bad += 1
            continue
        have = m.group(1)
        if have == want:
            continue
        if a.fix:
            text = re.sub(r"\b" + have + r"\b", want, text)
            open(full, "w", encoding="utf-8").write(text)
        else:
            print(f"{path}: guard {have}, want {want}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
