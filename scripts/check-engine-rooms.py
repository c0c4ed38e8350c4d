#!/usr/bin/env python3
# The engine (core/) knows the stack walk by one interface, core/src/session/stack_walk.hpp,
# and the one function that makes it; the walk's library (unwind/) and the runtimes
# (runtimes/) are parts of their own. This check fails when
#   - a source under core/ includes a header that lives in unwind/ or runtimes/ (by its
#     path from the project's root, "unwind/unwind_tables.hpp", or from its own library's,
#     "python/python_frames.hpp");
#   - core/CMakeLists.txt builds a source of theirs.
#
#   scripts/check-engine-rooms.py [--root DIR]   # exit 1 and one line per violation
#   scripts/check-engine-rooms.py --self-test    # the check on a tree made up for it
import argparse
import os
import re
import sys
import tempfile

PARTS = ("unwind", "runtimes")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def files_under(d, exts):
    for base, dirs, names in os.walk(d):
        dirs.sort()
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.join(base, n)


def check(root):
    theirs = set()  # header paths as an include may name them
    for part in PARTS:
        top = os.path.join(root, part)
        for f in files_under(top, (".h", ".hpp")):
            theirs.add(os.path.relpath(f, root))
            theirs.add(os.path.relpath(f, top))
    problems = []
    core = os.path.join(root, "core")
    for f in files_under(core, (".c", ".h", ".cpp", ".hpp")):
        text = open(f, encoding="utf-8").read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            own = os.path.exists(os.path.join(os.path.dirname(f), inc)) or any(
                os.path.exists(os.path.join(core, d, inc)) for d in ("src", "include")
            )
            if inc in theirs and not own:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{os.path.relpath(f, root)}:{line}: includes {inc}, a part "
                                "of the walk's libraries: the engine knows them by "
                                "session/stack_walk.hpp alone")
    cm = os.path.join(core, "CMakeLists.txt")
    if os.path.exists(cm):
        text = re.sub(r"#[^\n]*", "", open(cm, encoding="utf-8").read())
        for part in PARTS:
            for m in re.finditer(r"[^\s()]*\b" + part + r"/[^\s()]+", text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"core/CMakeLists.txt:{line}: names {m.group(0)}, a source of "
                                f"{part}/")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            p = os.path.join(root, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w", encoding="utf-8").write(text)

        write("unwind/unwind_tables.hpp", "")
        write("runtimes/python/python_frames.hpp", "")
        write("core/src/session/stack_walk.hpp", "")
        write("core/src/session/good.cpp", '#include "session/stack_walk.hpp"\n')
        write("core/CMakeLists.txt", "add_library(x src/session/good.cpp)\n")
        assert check(root) == [], check(root)
        write("core/src/session/bad.cpp",
              '#include "session/stack_walk.hpp"\n#include "unwind/unwind_tables.hpp"\n'
              '#include "python/python_frames.hpp"\n')
        write("core/CMakeLists.txt", "add_library(x ${PROJECT_SOURCE_DIR}/runtimes/registry.cpp)\n")
        got = check(root)
        assert len(got) == 3, got
        assert got[0].startswith("core/src/session/bad.cpp:2:"), got
        assert got[1].startswith("core/src/session/bad.cpp:3:"), got
        assert got[2].startswith("core/CMakeLists.txt:1:"), got
    print("check-engine-rooms: self-test passed")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    problems = check(os.path.abspath(a.root))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
