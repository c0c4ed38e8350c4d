#!/usr/bin/env python3
"""with_bpf_stats.py CMD [ARGS...]: runs CMD with the kernel's BPF run-time statistics on.

Statistics are turned on through BPF_ENABLE_STATS, whose fd the kernel counts: they stay on
while any holder lives and go off with the last one, however it ends. The sysctl
kernel.bpf_stats_enabled is one global flag instead: benches that saved and restored it ran
side by side under `ctest -L bench`, and one restored the other's "1", leaving every BPF
program on the machine paying two clock reads a run. CMD (and what it starts) inherits the
fd; the statistics end when they all exit.
"""
import ctypes
import os
import struct
import sys

_NR_BPF = {"x86_64": 321, "aarch64": 280}
_BPF_ENABLE_STATS = 32
_BPF_STATS_RUN_TIME = 0


def enable():
    """Returns an fd that keeps statistics on until it is closed (OSError if refused)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(struct.pack("I", _BPF_STATS_RUN_TIME), 4)
    fd = libc.syscall(_NR_BPF[os.uname().machine], _BPF_ENABLE_STATS, attr, 4)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, "BPF_ENABLE_STATS: " + os.strerror(err))
    return fd


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    fd = enable()
    os.set_inheritable(fd, True)
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
