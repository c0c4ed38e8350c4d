#!/usr/bin/env bash
# Loads every BPF program of every plugin on the running kernel, one loupe session per
# configuration (mechanism, kernel mode, fallback), and prints the verifier's instruction
# count of each program (bpf_prog_info.verified_insns: "processed N insns", as veristat
# reports it) as a Markdown table. Needs root and kernel >= 5.16; run it per kernel of
# the matrix:
#
#   scripts/verifier-stats.sh                    # this kernel
#   scripts/vmtest.sh 6.1 scripts/verifier-stats.sh
#   scripts/vmtest.sh 6.12 scripts/verifier-stats.sh
#
# LOUPE_BIN (default build/bin/loupe) picks the build. A configuration the kernel refuses
# is listed with loupe's reason instead of counts. Exit status 1 when any configuration
# that this kernel's preflight says it supports failed to load.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOUPE=${LOUPE_BIN:-$ROOT/build/bin/loupe}
[[ -x $LOUPE ]] || { echo "verifier-stats: $LOUPE not built (scripts/build.sh)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "verifier-stats: needs root" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/loupe-verifier.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The probe: run by loupe as the profiled command once every program is loaded and
# attached, it lists the programs its parent (loupe) holds, from /proc/PPID/fdinfo.
cat >"$WORK/progs.c" <<'EOF'
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	return *(const unsigned *)a - *(const unsigned *)b;
}

/* The full function name from BTF (prog names are cut at 15 characters). */
static void full_name(int fd, struct bpf_prog_info *info, char *out, size_t n)
{
	struct bpf_func_info fi[1];
	struct bpf_prog_info i2 = {};
	__u32 len = sizeof(i2);

	snprintf(out, n, "%s", info->name);
	if (!info->btf_id || !info->nr_func_info)
		return;
	i2.nr_func_info = 1;
	i2.func_info_rec_size = sizeof(fi[0]);
	i2.func_info = (unsigned long)fi;
	if (bpf_obj_get_info_by_fd(fd, &i2, &len))
		return;
	struct btf *btf = btf__load_from_kernel_by_id(info->btf_id);
	if (!btf)
		return;
	const struct btf_type *t = btf__type_by_id(btf, fi[0].type_id);
	if (t)
		snprintf(out, n, "%s", btf__name_by_offset(btf, t->name_off));
	btf__free(btf);
}

int main(int argc, char **argv)
{
	char path[64], line[256], name[128];
	unsigned ids[4096], nids = 0;
	int pid = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : getppid();
	FILE *out = argc > 2 ? fopen(argv[2], "w") : stdout;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", pid);
	DIR *d = opendir(path);
	if (!d || !out)
		return 2;
	for (struct dirent *e; (e = readdir(d)) && nids < 4096;) {
		char p[320];
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned id;
			if (sscanf(line, "prog_id: %u", &id) == 1)
				ids[nids++] = id;
		}
		fclose(f);
	}
	closedir(d);
	qsort(ids, nids, sizeof(ids[0]), cmp);
	for (unsigned i = 0; i < nids; i++) {
		if (i && ids[i] == ids[i - 1])
			continue;
		int fd = bpf_prog_get_fd_by_id(ids[i]);
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		full_name(fd, &info, name, sizeof(name));
		fprintf(out, "%s\t%u\t%u\n", name, info.verified_insns, info.xlated_prog_len / 8);
		close(fd);
	}
	return 0;
}
EOF
cc -O1 -o "$WORK/progs" "$WORK/progs.c" -lbpf || { echo "verifier-stats: cannot build the probe (libbpf-dev?)" >&2; exit 2; }

# plugin | configuration | loupe options | the plugin's keys (TOML)
t() { printf '\n[[plugins.targets]]\nname = "%s"\n%s = "%s"\n' "$1" "$2" "$3"; }
CASES=(
  "latency|uprobe pair|-|$(t getpid ufunc libc:getpid)"
  "latency|syscall pair (tracepoint)|-|$(t read syscall read)"
  "latency|kfunc pairs (fentry, 4 slots)|-|$(t a kfunc vfs_read; t b kfunc vfs_write; t c kfunc vfs_fsync; t d kfunc vfs_statx)"
  "latency|kfunc pair (kprobe, fentry disabled)|--disable-feature fentry|$(t a kfunc vfs_read)"
  "latency|linear buckets, per pid and comm|-|linear_buckets = true
per_pid = true
per_comm = true
$(t read syscall read)"
  "memalloc|user + kernel + pages|-|kernel = true
kernel_pages = true"
  "lockwait|futex + kernel (tp_btf) + pthread stacks|-|pthread_stacks = true"
  "lockwait|kernel (tracepoint, tp_btf disabled)|--disable-feature tp_btf|futex = false"
  "biolat|tp_btf|-|mechanism = \"tp_btf\""
  "biolat|raw_tp|-|mechanism = \"raw_tp\""
  "biolat|tracepoint|-|mechanism = \"tracepoint\""
  "cpusample|perf_event|-|"
  "cpusample|perf_event, unwind = dwarf|-|unwind = \"dwarf\""
  "jitregions|tracepoints + perf_event|-|file_backed = true"
  "syscount|tracepoint|-|"
  "fileio|syscalls, slow events (fp)|-|slow_us = 1"
  "fileio|syscalls, slow events (dwarf)|-|slow_us = 1
unwind = \"dwarf\""
  "fileio|vfs (fentry)|-|hooks = \"vfs\""
  "fileio|vfs (kprobe, fentry disabled)|--disable-feature fentry|hooks = \"vfs\""
  "tcp|accept by fexit|-|accept_hook = \"fexit\""
  "tcp|accept by kretprobe|-|accept_hook = \"kprobe\""
  "tcp|accept by syscall tracepoints|-|accept_hook = \"tracepoint\""
)

kernel=$(uname -r)
echo "#### $kernel"
echo
echo "| plugin | configuration | program | verified insns | xlated insns |"
echo "|---|---|---|--:|--:|"
failed=0
for c in "${CASES[@]}"; do
  plugin=${c%%|*}; c=${c#*|}
  conf=${c%%|*}; c=${c#*|}
  opts=${c%%|*}; body=${c#*|}
  prof=$WORK/p.toml
  {
    printf '[session]\noutput_dir = "%s/out"\n\n[[plugins]]\nname = "%s"\n' "$WORK" "$plugin"
    printf '%s\n' "$body"
    printf '\n[[sinks]]\nname = "jsonl"\n'
  } >"$prof"
  args=()
  [[ $opts != - ]] && read -ra args <<<"$opts"
  rm -f "$WORK/rows"
  rc=0
  "$LOUPE" -q "${args[@]}" run "$prof" -d 5 -- "$WORK/progs" 0 "$WORK/rows" \
    >"$WORK/log" 2>&1 || rc=$?
  if [[ -s $WORK/rows ]]; then
    sort "$WORK/rows" | while IFS=$'\t' read -r name vi xl; do
      echo "| $plugin | $conf | $name | $vi | $xl |"
    done
  else
    why=$(grep -m1 -iE 'error|refus|unsupported|not available|absent' "$WORK/log" ||
      tail -n1 "$WORK/log")
    why=${why//|/\\|}
    echo "| $plugin | $conf | (not loaded, exit $rc) | ${why:0:160} | |"
    # A refusal the preflight explains (exit 5, "cannot be traced on this kernel") is this
    # kernel's fact; anything else, and any verifier rejection, is a failure.
    if [[ $rc != 5 ]] || grep -qE 'processed [0-9]+ insns|unbounded|invalid access' "$WORK/log"; then
      failed=1
      sed 's/^/    /' "$WORK/log" | tail -n 30 >&2
    fi
  fi
done
exit "$failed"
