#!/usr/bin/python3
# The BPF lint's own test: it must report exactly the lines of ignored.bpf.c marked FLAG
# (each a way to throw a helper's result away) and nothing in checked.bpf.c (each a way
# to use it). Run by ctest as bpf_lint_fixtures.
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
lint = os.path.join(here, "..", "..", "scripts", "lint-bpf.py")


def run(name):
    path = os.path.join(here, name)
    r = subprocess.run([sys.executable, lint, path], capture_output=True, text=True)
    lines = sorted(int(m.group(1)) for m in re.finditer(r":(\d+): ", r.stdout))
    return r.returncode, lines, r.stdout


def marked(name):
    with open(os.path.join(here, name), encoding="utf-8") as fh:
        return [i + 1 for i, l in enumerate(fh) if "/* FLAG" in l]


fail = False
rc, lines, out = run("ignored.bpf.c")
want = sorted(marked("ignored.bpf.c"))
# The macro's call is reported at its own line (inside the #define).
if rc != 1 or lines != want:
    print(f"ignored.bpf.c: rc {rc}, reported lines {lines}, marked {want}\n{out}")
    fail = True
rc, lines, out = run("checked.bpf.c")
if rc != 0 or lines:
    print(f"checked.bpf.c: rc {rc}, reported lines {lines}, expected none\n{out}")
    fail = True
print("lint-bpf fixtures: " + ("FAILED" if fail else "ok"))
sys.exit(1 if fail else 0)
