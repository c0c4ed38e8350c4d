#!/usr/bin/env python3
# Each sink is a room of its own: editing one sink must never change another sink or the
# CLI behind their back. What several of them share lives in report/ (report/README.md).
# This check fails when
#   - a sink's CMake files (CMakeLists.txt, tests/*.cmake), core/CMakeLists.txt or
#     cli/CMakeLists.txt link a target defined in another sink's folder, or name another
#     sink's folder as a path;
#   - a source in a sink's folder, in core/ or in cli/, includes a header that lives in
#     another sink's folder (and not in its own).
# A test naming another sink's plugin as a runtime dependency (DEPENDS loupe-jsonl) is
# fine: that is the plugin as the CLI loads it, not its code.
#
#   scripts/check-sink-rooms.py [--root DIR]   # exit 1 and one line per violation
#   scripts/check-sink-rooms.py --self-test    # the check on a tree made up for it
import argparse
import os
import re
import sys
import tempfile

SOURCE_EXT = (".c", ".h", ".cpp", ".hpp")
LINK_CALL = re.compile(r"\b(target_link_libraries|loupe_add_plugin)\s*\(", re.I)
DEFINE_CALL = re.compile(r"\b(add_library|loupe_add_plugin)\s*\(\s*([A-Za-z0-9_.:+-]+)", re.I)
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def files_under(d, want):
    for base, dirs, names in os.walk(d):
        dirs.sort()
        for n in sorted(names):
            if want(n):
                yield os.path.join(base, n)


def is_cmake(n):
    return n == "CMakeLists.txt" or n.endswith(".cmake")


def strip_cmake_comments(text):
    return re.sub(r"#[^\n]*", "", text)


def call_bodies(text, pattern):
    """The argument text of every call matching `pattern` (parentheses balanced)."""
    for m in pattern.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield m.end(), text[m.end() : i - 1]


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check(root):
    sinks_dir = os.path.join(root, "sinks")
    sinks = sorted(
        n for n in os.listdir(sinks_dir) if os.path.isdir(os.path.join(sinks_dir, n))
    ) if os.path.isdir(sinks_dir) else []
    rel = lambda p: os.path.relpath(p, root)

    # Which sink defines which target.
    owner = {}
    for s in sinks:
        for f in files_under(os.path.join(sinks_dir, s), is_cmake):
            text = strip_cmake_comments(open(f, encoding="utf-8").read())
            for m in DEFINE_CALL.finditer(text):
                name = m.group(2)
                owner[name] = s
                if m.group(1).lower() == "loupe_add_plugin":
                    owner["loupe-" + name] = s

    # Headers by path relative to each sink's folder, and by file name.
    headers = {s: set() for s in sinks}
    for s in sinks:
        top = os.path.join(sinks_dir, s)
        for f in files_under(top, lambda n: n.endswith((".h", ".hpp"))):
            headers[s].add(os.path.relpath(f, top))

    def sink_holding(include, room, room_dir):
        """The other sink whose folder holds `include`, unless the room holds it too."""
        if os.path.exists(os.path.join(room_dir, include)):
            return None
        name = os.path.basename(include)
        if room and any(h == include or os.path.basename(h) == name for h in headers[room]):
            return None
        for s in sinks:
            for h in headers[s]:
                if h == include or h.endswith("/" + include) or (
                    "/" not in include and os.path.basename(h) == name
                ):
                    return s
        return None

    problems = []
    # (sink name, or None for the engine and the CLI; folder)
    rooms = [(s, os.path.join(sinks_dir, s)) for s in sinks]
    for shared in ("core", "cli"):
        if os.path.isdir(os.path.join(root, shared)):
            rooms.append((None, os.path.join(root, shared)))
    for room, top in rooms:
        who = f"sink {room}" if room else os.path.basename(top)
        cmake_files = list(files_under(top, is_cmake)) if room else [
            p for p in [os.path.join(top, "CMakeLists.txt")] if os.path.exists(p)
        ]
        for f in cmake_files:
            text = strip_cmake_comments(open(f, encoding="utf-8").read())
            for start, body in call_bodies(text, LINK_CALL):
                for t in re.finditer(r"[A-Za-z0-9_.:+-]+", body):
                    tok = t.group(0)
                    if tok in owner and owner[tok] != room:
                        where = f"{rel(f)}:{line_of(text, start + t.start())}"
                        problems.append(
                            f"{where}: {who} links {tok}, a target of sink {owner[tok]} "
                            "(shared code belongs in report/)"
                        )
            for m in re.finditer(r"sinks/([A-Za-z0-9_-]+)", text):
                if m.group(1) in sinks and m.group(1) != room:
                    problems.append(
                        f"{rel(f)}:{line_of(text, m.start())}: {who} names the folder "
                        f"sinks/{m.group(1)}"
                    )
        for f in files_under(top, lambda n: n.endswith(SOURCE_EXT)):
            text = open(f, encoding="utf-8", errors="replace").read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                other = None
                if re.search(r"(^|/)sinks/", inc):
                    other = inc.split("sinks/", 1)[1].split("/", 1)[0]
                else:
                    # Relative to the including file first, then to the room's top.
                    here = os.path.dirname(f)
                    if not os.path.exists(os.path.join(here, inc)):
                        other = sink_holding(inc, room, top)
                if other and other != room:
                    problems.append(
                        f"{rel(f)}:{line_of(text, m.start())}: {who} includes \"{inc}\" "
                        f"from sink {other} (shared code belongs in report/)"
                    )
    return problems


def self_test():
    def write(root, path, text):
        p = os.path.join(root, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)

    with tempfile.TemporaryDirectory() as root:
        write(root, "sinks/a/CMakeLists.txt",
              "add_library(a_lib STATIC a.cpp)\nloupe_add_plugin(a SOURCES s.cpp LIBS a_lib)\n")
        write(root, "sinks/a/a.hpp", "")
        write(root, "sinks/a/a.cpp", '#include "a.hpp"\n')
        write(root, "sinks/a/tests/tests.cmake",
              "# b_lib in a comment is fine\nadd_dependencies(t loupe-b)\n")
        write(root, "sinks/b/CMakeLists.txt", "add_library(b_lib STATIC b.cpp)\n"
              "loupe_add_plugin(b SOURCES b.cpp\n  LIBS b_lib)\n")
        write(root, "sinks/b/b.hpp", "")
        write(root, "sinks/b/tests/helper.hpp", "")
        write(root, "sinks/b/b.cpp", '#include "b.hpp"\n#include "loupe/sdk.hpp"\n')
        write(root, "core/CMakeLists.txt", "target_link_libraries(loupe PRIVATE loupe_core)\n")
        write(root, "cli/diff.cpp", '#include "commands.hpp"\n')
        write(root, "cli/commands.hpp", "")
        clean = check(root)
        if clean:
            print("self-test: a clean tree was reported:\n" + "\n".join(clean))
            return 1

        write(root, "sinks/b/CMakeLists.txt", "add_library(b_lib STATIC b.cpp)\n"
              "loupe_add_plugin(b SOURCES b.cpp\n  LIBS b_lib a_lib)\n")
        write(root, "sinks/a/tests/tests.cmake",
              "target_link_libraries(t PRIVATE loupe-b)\n"
              "target_include_directories(t PRIVATE ${CMAKE_SOURCE_DIR}/sinks/b)\n")
        write(root, "sinks/a/tests/t.cpp", '#include "helper.hpp"\n')
        write(root, "sinks/b/b.cpp", '#include "b.hpp"\n#include "a.hpp"\n')
        write(root, "core/CMakeLists.txt",
              "target_link_libraries(loupe PRIVATE loupe_core\n  b_lib)\n")
        write(root, "cli/diff.cpp",
              '#include "commands.hpp"\n#include "../sinks/a/a.hpp"\n')
        got = check(root)
        want = [
            "sinks/b/CMakeLists.txt:3: sink b links a_lib",
            "sinks/a/tests/tests.cmake:1: sink a links loupe-b",
            "sinks/a/tests/tests.cmake:2: sink a names the folder sinks/b",
            'sinks/a/tests/t.cpp:1: sink a includes "helper.hpp" from sink b',
            'sinks/b/b.cpp:2: sink b includes "a.hpp" from sink a',
            "core/CMakeLists.txt:2: core links b_lib",
            'cli/diff.cpp:2: cli includes "../sinks/a/a.hpp" from sink a',
        ]
        missing = [w for w in want if not any(g.startswith(w) for g in got)]
        extra = [g for g in got if not any(g.startswith(w) for w in want)]
        for w in missing:
            print("self-test: not reported: " + w)
        for g in extra:
            print("self-test: reported wrongly: " + g)
        if missing or extra:
            return 1
        print(f"self-test: {len(want)} violations reported, a clean tree passes")
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    problems = check(os.path.abspath(args.root))
    for p in problems:
        print(p)
    if problems:
        return 1
    print("sink rooms: no sink links or includes another sink's code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
