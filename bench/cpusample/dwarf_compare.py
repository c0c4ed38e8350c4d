#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unwinding without frame pointers: loupe cpusample (unwind = "tables", the default, and
the "fp" and "dwarf" overrides) against `perf record -F 99 --call-graph dwarf,16384` (and `-g`)
on the same run of one of Debian's own programs, built without frame pointers like most
of Debian.

    bench/cpusample/dwarf_compare.py BUILD_DIR [ROUNDS=3] [MB=4] [WORKLOAD=xz]

WORKLOAD: xz (xz -6 -T1 compressing an MB-sized word salad), gzip (gzip -9 of the same),
bzip2 (bzip2 -9 of the same), sort (sort -V of its lines), perl (Debian's perl counting
its words in a hash) or python3 (Debian's python3.11 counting the salad's words in a
dict, then recursive fib(): the interpreter's C stacks). Every round runs each variant once, in a rotated order
(drift hits all alike). The workload is started stopped
(SIGSTOP before exec), the profiler attaches to its pid (loupe --pid, perf -p), then it
is continued, so its own wall and CPU time (wait4) are measured apart from the
profilers' start-up. Reported per variant (medians over rounds):

  wall / slowdown      the workload's elapsed time, against no profiler
  cpu                  the workload's user+sys time
  prof_cpu             the profiler process's user+sys time for the whole session
  post_cpu             perf only: `perf script` (where perf unwinds dwarf stacks)
  samples, main%       samples of the workload, and the share whose user stack reaches
                       main (the frame __libc_start_call_main called, in its executable)
                       or, in a thread, libc's start_thread
  top paths            the 5 heaviest user call paths (root -> leaf), frames named as loupe
                       names them: symbol, else `module [fn@0xFDE start]` (perf's [unknown]
                       frames are named from the module's .eh_frame the same way)
  top leaves           perf --call-graph dwarf's 5 heaviest leaf functions, and each one's
                       share under every variant, with loupe-tables' distance in points

Root only; perf absent from PATH is reported as absent.
"""
import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import with_bpf_stats  # noqa: E402

PY_SCRIPT = """
import sys
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
counts = {}
for w in open(sys.argv[1]).read().split():
    counts[w] = counts.get(w, 0) + 1
for _ in range(int(float(sys.argv[2]) * 12)):
    fib(30)
"""

# name: (argv for the input file and MB, comm, executable holding main)
WORKLOADS = {
    "xz": (lambda data, mb: ["/usr/bin/xz", "-6", "-T1", "-c", "-k", data], "xz", "/usr/bin/xz"),
    "gzip": (lambda data, mb: ["/usr/bin/gzip", "-9", "-c", data], "gzip", "/usr/bin/gzip"),
    "bzip2": (lambda data, mb: ["/usr/bin/bzip2", "-9", "-c", "-k", data], "bzip2", "/usr/bin/bzip2"),
    "sort": (lambda data, mb: ["/usr/bin/sort", "-V", "-o", "/dev/null", data], "sort", "/usr/bin/sort"),
    "perl": (lambda data, mb: ["/usr/bin/perl", "-e",
                               "my %c; while (<>) { $c{$_}++ for split } print scalar(keys %c), qq(\\n)",
                               data], "perl", "/usr/bin/perl"),
    "python3": (lambda data, mb: ["/usr/bin/python3.11", "-c", PY_SCRIPT, data, str(mb)],
                "python3.11", "/usr/bin/python3.11"),
}
W = WORKLOADS["xz"]  # the one this run measures (main() sets it)


def words_file(path, mb):
    import random

    rng = random.Random(17)
    words = ["loupe", "stack", "frame", "unwind", "sample", "kernel", "user", "dwarf", "cfi",
             "eh_frame", "lzma", "xz", "main", "return", "address", "the", "of", "and", "a",
             "to", "profile", "pointer", "register"]
    out, size = [], 0
    while size < mb * 1_000_000:
        w = rng.choice(words) + ("\n" if rng.randrange(11) == 0 else " ")
        out.append(w)
        size += len(w)
    with open(path, "w") as f:
        f.write("".join(out))


def start_stopped(argv):
    """Starts argv and stops it right after its exec (the profilers then attach to a running
    xz image, as to any running process); it has run for well under a millisecond."""
    pid = os.fork()
    if pid == 0:
        fd = os.open("/dev/null", os.O_WRONLY)
        os.dup2(fd, 1)
        os.execv(argv[0], argv)
    while True:
        try:
            if os.readlink("/proc/%d/exe" % pid) == argv[0]:
                break
        except OSError:
            pass
    os.kill(pid, signal.SIGSTOP)
    os.waitpid(pid, os.WUNTRACED)
    return pid


def cpu(ru):
    return ru.ru_utime + ru.ru_stime


# ---- naming frames alike on both sides ---------------------------------------------------

_fde_cache = {}


def fde_starts(path):
    """Sorted (start, end) of the FDEs in `path`'s .eh_frame (readelf)."""
    if path not in _fde_cache:
        ranges = []
        try:
            txt = subprocess.run(["readelf", "-wf", path], capture_output=True, text=True).stdout
            for m in re.finditer(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", txt):
                ranges.append((int(m.group(1), 16), int(m.group(2), 16)))
        except OSError:
            pass
        _fde_cache[path] = sorted(ranges)
    return _fde_cache[path]


_seg_cache = {}


def file_to_vaddr(path, off):
    """perf prints an unresolved frame's address relative to its mapping (a file offset);
    FDEs are in link-time addresses, which differ from offsets in non-PIE executables
    (python3.11 loads at 0x400000)."""
    if path not in _seg_cache:
        segs = []
        try:
            txt = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
            for m in re.finditer(r"LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x([0-9a-f]+)", txt):
                segs.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)))
        except OSError:
            pass
        _seg_cache[path] = segs
    for offset, vaddr, filesz in _seg_cache[path]:
        if offset <= off < offset + filesz:
            return off - offset + vaddr
    return off


def fde_name(path, off):
    import bisect

    vaddr = file_to_vaddr(path, off)
    r = fde_starts(path)
    i = bisect.bisect_right(r, (vaddr, 1 << 64)) - 1
    if i >= 0 and r[i][0] <= vaddr < r[i][1]:
        return "%s [fn@0x%x]" % (os.path.basename(path), r[i][0])
    return "%s+0x%x" % (os.path.basename(path), vaddr)


def norm(sym):
    sym = re.sub(r"@@?[A-Z][A-Za-z0-9_.]*$", "", sym)  # symbol versions (__libc_start_main@GLIBC_2.2.5)
    # glibc's internal aliases of one address (perf prefers them with libc6-dbg installed)
    sym = re.sub(r"^__GI_", "", sym)
    if sym in ("__libc_malloc", "__malloc"):
        return "malloc"
    if sym in ("__libc_free", "__free"):
        return "free"
    if sym.startswith("__libc_start_main"):
        return "__libc_start_main"
    return sym


def reaches_main(frames):
    """frames leaf first: (name, module path). A thread's stack is whole at start_thread
    (sort -V sorts in threads)."""
    for i in range(1, len(frames)):
        if frames[i][0] == "__libc_start_call_main" and frames[i - 1][1] == W[2]:
            return True
        if frames[i][0] == "start_thread" and "libc.so" in frames[i][1]:
            return True
    return False


def loupe_stacks(jsonl):
    out = []  # (count, [(name, module)] leaf first, user frames only)
    with open(jsonl) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") != "stack" or not r.get("is_final") or r["labels"].get("comm") != W[1]:
                continue
            n = r["stack"]["values"][0]["value"]
            frames = [(norm(fr.get("symbol") or "%s+0x%x" % (os.path.basename(fr.get("module") or "?"), fr["offset"])),
                       fr.get("module") or "")
                      for fr in r["stack"]["frames"] if fr["kind"] != "kernel"]
            out.append((n, frames))
    return out


def perf_stacks(data):
    t0 = os.times()
    p = subprocess.Popen(["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    txt, _ = p.communicate()
    t1 = os.times()
    post = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    out = []
    for block in txt.split("\n\n"):
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines or not lines[0].strip().startswith(W[1]):
            continue
        frames = []
        prev_ip = None
        for l in lines[1:]:
            # perf names the code at one address once per inlined level ("sym (inlined)",
            # no module); loupe names the function holding it: keep one line per address.
            m = re.match(r"\s*([0-9a-f]+) (.*) \((.*)\)$", l)
            if not m or m.group(3) == "[kernel.kallsyms]" or int(m.group(1), 16) == prev_ip:
                continue
            ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
            prev_ip = ip
            if sym.startswith("[unknown]"):
                name = fde_name(dso, ip) if dso.startswith("/") else "[unknown]"
            else:
                name = norm(re.sub(r"\+0x[0-9a-f]+$", "", sym))
            frames.append((name, dso))
        out.append((1, frames))
    return out, post


def leaf_shares(rounds):
    """Each leaf function's share of the samples (percent), over every round."""
    leaves, total = collections.Counter(), 0
    for x in rounds:
        for n, f in x["stacks"]:
            total += n
            if f:
                leaves[f[0][0]] += n
    return {k: 100.0 * n / max(1, total) for k, n in leaves.items()}


def summarize(stacks):
    total = sum(n for n, _ in stacks)
    rooted = sum(n for n, f in stacks if reaches_main(f))
    paths = collections.Counter()
    for n, f in stacks:
        paths[";".join(name for name, _ in reversed(f))] += n
    return total, rooted, paths


# ---- variants ----------------------------------------------------------------------------


def run_variant(variant, build, tmp, data, mb):
    pid = start_stopped(W[0](data, mb))
    prof = None
    out = os.path.join(tmp, variant)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if variant.startswith("loupe"):
        unwind = variant.split("-")[1]
        profile = os.path.join(out, "p.toml")
        with open(profile, "w") as f:
            f.write('[session]\noutput_dir = "%s/o"\n[[plugins]]\nname = "cpusample"\n'
                    'frequency = 99\nunwind = "%s"\n[[sinks]]\nname = "jsonl"\n' % (out, unwind))
        prof = subprocess.Popen([os.path.join(build, "bin/loupe"), "run", profile, "--pid", str(pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)  # preflight, load, attach
    elif variant.startswith("perf"):
        cg = ["--call-graph", "dwarf,16384"] if variant == "perf-dwarf" else ["-g"]
        prof = subprocess.Popen(["perf", "record", "-q", "-F", "99"] + cg +
                                ["-o", os.path.join(out, "perf.data"), "-p", str(pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGCONT)
    _, _, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    res = {"wall": wall, "cpu": cpu(ru), "prof_cpu": 0.0, "post_cpu": 0.0, "stacks": []}
    if prof:
        if variant.startswith("perf"):
            time.sleep(0.2)
        _, _, pru = os.wait4(prof.pid, 0)
        res["prof_cpu"] = cpu(pru)
        if variant.startswith("loupe"):
            res["stacks"] = loupe_stacks(os.path.join(out, "o", "records.jsonl"))
        else:
            res["stacks"], res["post_cpu"] = perf_stacks(os.path.join(out, "perf.data"))
    return res


def bpf_ns_per_run(build, tmp, data, mb, unwind):
    """cs_sample / cs_sample_dwarf run time per sample (BPF run-time statistics), one run."""
    prog = "cs_sample_dwarf" if unwind == "dwarf" else "cs_sample"
    stats = with_bpf_stats.enable()  # on until closed, however this ends
    try:
        pid = start_stopped(W[0](data, mb))
        profile = os.path.join(tmp, "stats.toml")
        with open(profile, "w") as f:
            f.write('[session]\noutput_dir = "%s/stats"\n[[plugins]]\nname = "cpusample"\n'
                    'unwind = "%s"\n[[sinks]]\nname = "jsonl"\n' % (tmp, unwind))
        prof = subprocess.Popen([os.path.join(build, "bin/loupe"), "run", profile, "--pid", str(pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        os.kill(pid, signal.SIGCONT)
        last = None
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            txt = subprocess.run(["bpftool", "prog", "show", "name", prog], capture_output=True,
                                 text=True).stdout
            m = re.search(r"run_time_ns (\d+) run_cnt (\d+)", txt)
            if m:
                last = (int(m.group(1)), int(m.group(2)))
            time.sleep(0.5)
        prof.wait()
        return (last[0] / last[1], last[1]) if last and last[1] else (0.0, 0)
    finally:
        os.close(stats)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    mb = float(sys.argv[3]) if len(sys.argv) > 3 else 4
    global W
    name = sys.argv[4] if len(sys.argv) > 4 else "xz"
    if name not in WORKLOADS:
        sys.exit("WORKLOAD: one of %s" % ", ".join(WORKLOADS))
    W = WORKLOADS[name]
    if os.geteuid() != 0:
        sys.exit("root only")
    if not os.path.ismount("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)
    variants = ["base", "loupe-tables", "loupe-fp", "loupe-dwarf"]
    if shutil.which("perf"):
        variants += ["perf-fp", "perf-dwarf"]
    else:
        print("perf: absent")
    tmp = tempfile.mkdtemp()
    try:
        data = os.path.join(tmp, "input.txt")
        words_file(data, mb)
        res = collections.defaultdict(list)
        for r in range(rounds):
            for i in range(len(variants)):
                v = variants[(i + r) % len(variants)]
                res[v].append(run_variant(v, build, tmp, data, mb))
        base = statistics.median(x["wall"] for x in res["base"])
        print("%s on %.1f MB, %d rounds, medians; 99 Hz; load average %s" %
              (" ".join(os.path.basename(a) for a in W[0]("IN", mb) if "\n" not in a), mb, rounds,
               open("/proc/loadavg").read().split()[0]))
        print("%-12s %8s %9s %8s %9s %9s %8s %7s" %
              ("variant", "wall", "slowdown", "cpu", "prof_cpu", "post_cpu", "samples", "main%"))
        tops = {}
        for v in variants:
            rs = res[v]
            wall = statistics.median(x["wall"] for x in rs)
            line = "%-12s %8.3f %8.2f%% %8.3f %9.3f %9.3f" % (
                v, wall, (wall - base) * 100 / base, statistics.median(x["cpu"] for x in rs),
                statistics.median(x["prof_cpu"] for x in rs), statistics.median(x["post_cpu"] for x in rs))
            if v != "base":
                total, rooted, paths = summarize([s for x in rs for s in x["stacks"]])
                line += " %8d %6.1f%%" % (total, 100.0 * rooted / max(1, total))
                tops[v] = (total, paths)
            print(line)
        shown = [v for v in ("loupe-tables", "perf-dwarf") if v in tops]
        tops5 = {v: tops[v][1].most_common(5) for v in shown}
        # The root part every shown path shares is printed once.
        split = [p.split(";") for v in shown for p, _ in tops5[v]]
        common = 0
        while split and all(len(x) > common + 1 and x[common] == split[0][common] for x in split):
            common += 1
        if common:
            print("\ncommon root of the paths below: %s" % ";".join(split[0][:common]))
        for v in shown:
            total = tops[v][0]
            print("\ntop call paths, %s (share of %s samples; ... = the common root):" % (v, W[1]))
            for p, n in tops5[v]:
                print("  %5.1f%%  %s%s" % (100.0 * n / max(1, total), "...;" if common else "",
                                          ";".join(p.split(";")[common:])))
        if "perf-dwarf" in tops:
            leaves = {v: leaf_shares(res[v]) for v in tops}
            print("\ntop-5 leaves of perf-dwarf, share of samples per variant (points from perf-dwarf):")
            print("  %-40s" % "leaf" + "".join("%14s" % v for v in tops))
            worst = 0.0
            for leaf, ref in sorted(leaves["perf-dwarf"].items(), key=lambda kv: -kv[1])[:5]:
                row = "  %-40s" % leaf[:40]
                for v in tops:
                    share = leaves[v].get(leaf, 0.0)
                    row += "%7.1f%% %+5.1f" % (share, share - ref)
                    if v == "loupe-tables":
                        worst = max(worst, abs(share - ref))
                print(row)
            print("loupe-tables: largest distance from perf-dwarf's top-5 leaves: %.1f points" % worst)
        if shutil.which("bpftool"):
            for unwind in ("tables", "fp", "dwarf"):
                ns, runs = bpf_ns_per_run(build, tmp, data, mb, unwind)
                print("\nBPF run time, unwind = %s: %.0f ns per sample (%d samples)" % (unwind, ns, runs),
                      end="")
            print()
        if "loupe-dwarf" in tops and "perf-dwarf" in tops:
            a = [p for p, _ in tops["loupe-dwarf"][1].most_common(5)]
            b = [p for p, _ in tops["perf-dwarf"][1].most_common(5)]
            print("\ntop-5 paths in common: %d of 5 (same order: %s)" % (len(set(a) & set(b)), a == b))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
