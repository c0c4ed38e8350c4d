# The Python frames tests' workload: each mode does its work in functions of known names
# and prints, as one JSON line, what it measured itself (thread CPU time, wall time), so a
# test holds loupe to the program's own figures, not to fixed timings.
#   cpu SECONDS        heavy() and light() alternate at 2:1 of this thread's CPU time
#   threads SECONDS    four threads, each spinning in its own function
#   sleep SECONDS      sleeper() blocks in time.sleep; the wall time it spent there, that
#                      less its CPU time there, and its run-queue wait there
#   wait               prints its pid, spins in waiting_loop() until stdin closes
#   alloc              allocate() makes 64 buffers of 1 MiB (kept until the end)
#   lock SECONDS       four threads in contend() take one threading.Lock, holding it 2 ms;
#                      the time they waited for it
import json
import random
import sys
import threading
import time


def spin_for(cpu_seconds):
    end = time.thread_time() + cpu_seconds
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def heavy(slice_s):
    return spin_for(2 * slice_s)


def light(slice_s):
    return spin_for(slice_s)


def cpu(seconds):
    # Slices of random length: a fixed 30 ms cycle beats with a 99 Hz sampler whose timer an
    # emulated guest keeps coarse (pyenv's 3.10 under TCG: 65.4 % sampled for 59.5 % spent).
    rng = random.Random(7)
    spent = {"heavy": 0.0, "light": 0.0}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, fn in (("heavy", heavy), ("light", light)):
            t0 = time.thread_time()
            fn(rng.uniform(0.002, 0.018))
            spent[name] += time.thread_time() - t0
    return spent


def worker_alpha(end):
    while time.monotonic() < end:
        spin_for(0.005)


def worker_beta(end):
    while time.monotonic() < end:
        spin_for(0.005)


def worker_gamma(end):
    while time.monotonic() < end:
        spin_for(0.005)


def worker_delta(end):
    while time.monotonic() < end:
        spin_for(0.005)


def threads(seconds):
    end = time.monotonic() + seconds
    ts = [threading.Thread(target=f, args=(end,), name=f.__name__)
          for f in (worker_alpha, worker_beta, worker_gamma, worker_delta)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"threads": [t.name for t in ts]}


def run_delay():
    # Seconds this thread has waited on a run queue for a CPU (the scheduler's own count,
    # schedstat's second field); 0 where the kernel keeps none.
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def sleeper(seconds):
    # Each sleep's wall time, and that less the CPU time the thread spent in it (entering
    # and leaving the call: microseconds natively, ~5 % of a 20 ms sleep under emulation),
    # and the run-queue wait around it: on a busy machine the thread is also preempted
    # there, which is off the CPU but not asleep.
    wall = off = queued = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        q0 = run_delay()
        t0, c0 = time.monotonic(), time.thread_time()
        time.sleep(0.02)
        w = time.monotonic() - t0
        wall += w
        off += w - (time.thread_time() - c0)
        queued += run_delay() - q0
    return wall, off, queued


def sleep(seconds):
    wall, off, queued = sleeper(seconds)
    return {"sleeper_s": wall, "sleeper_off_cpu_s": off, "sleeper_run_delay_s": queued}


def waiting_loop():
    while not sys.stdin.read(1) == "":
        pass


def wait(_):
    print(json.dumps({"pid": __import__("os").getpid()}), flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (waiting_loop(), done.set()), daemon=True).start()
    while not done.is_set():
        spin_for(0.01)
    return {}


def allocate(n, size):
    return [bytearray(size) for _ in range(n)]


def alloc(_):
    kept = allocate(64, 1 << 20)
    return {"buffers": len(kept), "bytes_each": len(kept[0])}


def contend(lock, end, waited, i):
    while time.monotonic() < end:
        t0 = time.monotonic()
        lock.acquire()
        waited[i] += time.monotonic() - t0
        spin_for(0.002)
        lock.release()


def lock(seconds):
    the_lock = threading.Lock()
    end = time.monotonic() + seconds
    waited = [0.0] * 4
    ts = [threading.Thread(target=contend, args=(the_lock, end, waited, i)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"waited_s": sum(waited)}


if __name__ == "__main__":
    mode = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0
    out = {"cpu": cpu, "threads": threads, "sleep": sleep, "wait": wait, "alloc": alloc,
           "lock": lock}[mode](seconds)
    print(json.dumps(out), flush=True)
