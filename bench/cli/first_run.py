#!/usr/bin/env python3
"""What a new user sees first: every bundled profile, unchanged, on a short Debian command.

For each profile: the report's length and widest line (display columns, as a terminal shows
them), the time from exec to "session running" (loupe's own log line, so the command's run
time is not counted), the run's exit status, and every warning loupe printed.

    sudo bench/cli/first_run.py [--loupe build/bin/loupe] [--rounds 3] [--markdown]

Goals (issue "The first hour"): <= 60 lines, <= 120 columns, < 0.3 s to running, and no
warning a user cannot act on.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One short command per profile, of Debian's own binaries, that exercises what the profile
# measures. Inputs are created in the working directory.
GZIP = "gzip -9 -c /usr/bin/bash > bash.gz"
WORKLOADS = {
    "default": GZIP,
    "cpu": GZIP,
    "offcpu": "sleep 0.1; " + GZIP + "; sync",
    "wall": "sleep 0.1; " + GZIP,
    "files": GZIP + "; cat bash.gz > /dev/null; sync",
    "bio": "dd if=/dev/zero of=bio.dat bs=64k count=64 oflag=direct status=none; sync",
    "net": "/usr/bin/python3.11 -c \"import socket,threading\n"
           "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\n"
           "def serve():\n c,_=s.accept(); c.sendall(c.recv(65536)*4); c.close()\n"
           "t=threading.Thread(target=serve); t.start()\n"
           "c=socket.create_connection(s.getsockname()); c.sendall(b'x'*4096); c.recv(65536)\n"
           "t.join()\"",
    "latency": "dd if=/usr/bin/bash of=/dev/null bs=4k status=none",
    "memory": "sort -R /usr/share/dict/words > /dev/null 2>&1 || sort -R /etc/services > /dev/null",
    "lock": "xz -T2 -6 -c /usr/bin/bash > /dev/null",
    "jit": "/usr/bin/python3.11 -c 'sum(range(10**6))'",
    "python": "/usr/bin/python3.11 -c 'import json, gc; gc.collect(); sum(range(10**6))'",
}


def columns(line):
    """Display width: wide (East Asian) characters take two columns, combining ones none."""
    width = 0
    for ch in line:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def run_once(loupe, profile, command, workdir):
    out_dir = os.path.join(workdir, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [loupe, "-v", "run", profile, "-o", out_dir, "--", "sh", "-c", command]
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    running_at = None
    warnings = []
    for line in proc.stderr:
        if running_at is None and "session running" in line:
            running_at = time.monotonic() - start
        if ": warning: " in line or ": error: " in line:
            warnings.append(line.rstrip())
    report = proc.stdout.read()
    rc = proc.wait()
    lines = report.splitlines()
    return {
        "lines": len(lines),
        "widest": max((columns(l) for l in lines), default=0),
        "running_s": running_at,
        "rc": rc,
        "warnings": warnings,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loupe", default=os.path.join(ROOT, "build/bin/loupe"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("first_run.py: needs root (loupe loads BPF programs)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="loupe-first-run.") as workdir:
        for name, command in WORKLOADS.items():
            profile = os.path.join(ROOT, "profiles", name + ".toml")
            runs = [run_once(args.loupe, profile, command, workdir) for _ in range(args.rounds)]
            starts = [r["running_s"] for r in runs if r["running_s"] is not None]
            last = runs[-1]
            rows.append((name, last["lines"], last["widest"],
                         statistics.median(starts) if starts else None, last["rc"],
                         sorted({w.split(": ", 2)[-1] for r in runs for w in r["warnings"]})))

    fmt = "| {} | {} | {} | {} | {} | {} |" if args.markdown else "{:<8} {:>5} {:>6} {:>9} {:>3}  {}"
    print(fmt.format("profile", "lines", "widest", "running", "rc", "warnings"))
    if args.markdown:
        print("|---|---|---|---|---|---|")
    for name, lines, widest, start, rc, warns in rows:
        started = f"{start:.2f} s" if start is not None else "never"
        print(fmt.format(name, lines, widest, started, rc, "; ".join(warns) or "none"))


if __name__ == "__main__":
    main()
