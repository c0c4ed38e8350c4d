#!/usr/bin/python3
# Flags BPF helper calls whose failure would go unnoticed: a map insert, a push, a ring
# output or a stack id whose return value is thrown away. Each such failure is data lost
# without a counter (issue 27: every bounded map reports its losses), so the result must
# be tested, assigned or returned; a `(void)` cast is a discard too.
#
#   scripts/lint-bpf.py            every tracked *.bpf.c / *.bpf.h under bpf/, plugins/,
#                                  sdk/ and core/ (a new plugin is covered without being
#                                  listed; bench/'s do-nothing programs are cost baselines
#                                  and tests/lint holds the lint's own bad examples)
#   scripts/lint-bpf.py FILE...    those files only (the lint's own test uses this)
#
# Prints file:line: call for each finding and exits 1 when there is one.
import os
import re
import subprocess
import sys

CHECKED = ("bpf_map_update_elem", "bpf_map_push_elem", "bpf_ringbuf_output",
           "bpf_perf_event_output", "bpf_get_stackid")

# Paths whose audit is still under way elsewhere, left out until it lands: keep it empty.
PENDING_AUDIT = ()

ROOTS = ("bpf/", "plugins/", "sdk/", "core/")

# A statement starts after one of these tokens; a call right after it is a statement of
# its own, so its value goes nowhere.
STATEMENT_START = {";", "{", "}", "else", "do", ":"}
CONTROL = {"if", "while", "for", "switch"}

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d[\w.]*)
  | (?P<punct>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!=<>]=?|[(){}\[\];,?:~.#\\])
""", re.S | re.X)


def tokens(text):
    """(token, line) pairs without comments and whitespace; preprocessor line breaks
    (backslash-newline) are whitespace, so macro bodies are read like code."""
    out, line, pos = [], 1, 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            pos += 1
            continue
        kind, tok = m.lastgroup, m.group()
        if kind not in ("ws", "comment") and tok != "\\":
            out.append((tok, line))
        line += tok.count("\n")
        pos = m.end()
    return out


def matching_open(toks, close):
    depth = 0
    for i in range(close, -1, -1):
        if toks[i][0] == ")":
            depth += 1
        elif toks[i][0] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def matching_close(toks, open_):
    depth = 0
    for i in range(open_, len(toks)):
        if toks[i][0] == "(":
            depth += 1
        elif toks[i][0] == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(toks) - 1


def discarded(toks, i):
    """True when the call whose name is toks[i] is an expression statement."""
    end = matching_close(toks, i + 1)
    if end + 1 < len(toks) and toks[end + 1][0] not in (";", ","):
        return False  # part of a larger expression: `f(...) == 0`, `f(...) < 0`, ...
    j = i - 1
    while j >= 0 and toks[j][0] == ")":
        # `if (...) f();`, `for (...) f();` or a cast `(void)f()` / `(long)f()`.
        o = matching_open(toks, j)
        inside = [t for t, _ in toks[o + 1:j]]
        before = toks[o - 1][0] if o > 0 else ";"
        if before in CONTROL:
            return True
        if inside == ["void"]:
            return True
        if all(re.fullmatch(r"[A-Za-z_]\w*|\*", t) for t in inside) and inside:
            j = o - 1  # a value cast: what precedes it decides
            continue
        return False
    if j < 0:
        return True
    prev = toks[j][0]
    if prev == ",":
        # A comma in a call's arguments passes the value on; at statement level (rare,
        # `a, f();`) it does not: look for an enclosing open paren.
        depth = 0
        for k in range(j - 1, -1, -1):
            t = toks[k][0]
            if t in (")", "]", "}"):
                depth += 1
            elif t in ("(", "[", "{"):
                if depth == 0:
                    return t == "{"
                depth -= 1
            elif t == ";" and depth == 0:
                return True
        return True
    if prev == ":":
        # `case X:` or a label starts a statement; `c ? a : f()` passes the value on.
        depth = 0
        for k in range(j - 1, -1, -1):
            t = toks[k][0]
            if t == "?" and depth == 0:
                return False
            if t in (";", "{", "}") and depth == 0:
                return True
            if t == ")":
                depth += 1
            elif t == "(":
                depth -= 1
        return True
    return prev in STATEMENT_START


def lint(path, text):
    toks = tokens(text)
    found = []
    for i, (tok, line) in enumerate(toks):
        if tok not in CHECKED or i + 1 >= len(toks) or toks[i + 1][0] != "(":
            continue
        if i > 0 and toks[i - 1][0] in ("define", ".", "->"):
            continue
        if discarded(toks, i):
            found.append(f"{path}:{line}: the result of {tok}() is ignored: count the failure "
                         "(a lost insert, push or record must reach a health record)")
    return found


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.bpf.c", "*.bpf.h"],
                         capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if f.startswith(ROOTS) and not (PENDING_AUDIT and f.startswith(PENDING_AUDIT))]


def main(argv):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if argv:
        files = [(f, f) for f in argv]
    else:
        files = [(f, os.path.join(root, f)) for f in tracked_files(root)]
        if not files:
            print("lint-bpf: no *.bpf.c files found (not a git checkout?)", file=sys.stderr)
            return 2
    findings = []
    for name, path in files:
        with open(path, encoding="utf-8") as fh:
            findings += lint(name, fh.read())
    for f in findings:
        print(f)
    if findings:
        print(f"lint-bpf: {len(findings)} ignored result(s)", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
