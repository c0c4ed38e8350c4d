// SPDX-License-Identifier: Apache-2.0
/*
 * A workload whose time off the CPU is known, measured by the workload itself.
 *
 *   offcpu_workload blockers   three threads, each blocking in a function of its own:
 *       sleep_in_sleeper    100 x nanosleep(10 ms)                      (S: sleep)
 *       read_in_reader      50 reads of a pipe, each written 20 ms later
 *                           by write_from_writer on another thread      (S, woken by it)
 *       wait_in_vfork       10 x vfork(), the child sleeping 30 ms      (D: uninterruptible)
 *     and prints, per function, its wall time and its thread's CPU time in it (so the time
 *     it spent off the CPU, for whatever reason, is exactly the difference), and the pid:
 *       pid=N sleep_ns=N sleep_cpu_ns=N read_ns=N read_cpu_ns=N vfork_ns=N vfork_cpu_ns=N
 *       sleep_tid=N (the sleeper thread's id)
 *   offcpu_workload halves     spin_half: 1 s of its own CPU time; then sleep_half: 1 s asleep;
 *                              prints spin_cpu_ns=N sleep_ns=N
 *   offcpu_workload crowd S    3 threads spinning on CPU 0 for S seconds (run-queue waits),
 *                              in spin_in_crowd; prints crowd_pid=N, then the threads' own
 *                              time waiting on a run queue (the scheduler's schedstat
 *                              run_delay, summed with the main thread's): crowd_run_delay_ns=N
 *   offcpu_workload lone S     1 thread on the last CPU for S seconds, working 1 ms
 *                              every 10 ms in spin_alone; prints lone_pid=N, then
 *                              lone_run_delay_ns=N and oversleep_ns=N (its sleeps' lateness);
 *                              both also print <mode>_off_cpu_ns=N (wall minus CPU time)
 *   offcpu_workload pingpong S  2 threads on CPU 0 passing a byte back and forth over two
 *                              pipes for S seconds (each waits off the CPU for the other:
 *                              a context switch each way); prints round_trips=N
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Each blocking call sits in a function of its own: frame-pointer unwinding from a libc
 * syscall wrapper (built without frame pointers) skips the wrapper's direct caller, so
 * these helpers are what it skips, and the functions the test looks for stay. */
__attribute__((noinline)) static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

  while (nanosleep(&ts, &ts) != 0) {
  }
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A function's wall time and its thread's CPU time, from its first line to its last. */
struct span {
  uint64_t wall, cpu;
};

static struct span span_start(void) {
  struct span s = {now_ns(), thread_cpu_ns()};

  return s;
}

static void span_end(struct span* s) {
  s->cpu = thread_cpu_ns() - s->cpu;
  s->wall = now_ns() - s->wall;
}

static int pipe_fds[2];
static struct span sleep_span, read_span, vfork_span;
static pid_t sleep_tid;

__attribute__((noinline)) static void sleep_in_sleeper(struct span* s) {
  *s = span_start();
  for (int i = 0; i < 100; i++) sleep_ms(10);
  span_end(s);
}

__attribute__((noinline)) static ssize_t read_byte(char* c) {
  return read(pipe_fds[0], c, 1);
}

__attribute__((noinline)) static ssize_t write_byte(void) {
  return write(pipe_fds[1], "x", 1);
}

/* The parent waits uninterruptibly until the child, which sleeps `ms`, exits. */
__attribute__((noinline)) static pid_t vfork_sleeping_child(long ms) {
  pid_t p = vfork();

  if (p == 0) {
    struct timespec ts = {0, ms * 1000000L};

    syscall(SYS_nanosleep, &ts, NULL);
    _exit(0);
  }
  return p;
}

__attribute__((noinline)) static void read_in_reader(struct span* s) {
  char c;

  *s = span_start();
  for (int i = 0; i < 50; i++)
    if (read_byte(&c) != 1) exit(3);
  span_end(s);
}

__attribute__((noinline)) static void write_from_writer(void) {
  for (int i = 0; i < 50; i++) {
    sleep_ms(20);
    if (write_byte() != 1) exit(3);
  }
}

__attribute__((noinline)) static void wait_in_vfork(struct span* s) {
  *s = span_start();
  for (int i = 0; i < 10; i++)
    if (vfork_sleeping_child(30) < 0) exit(3);
  span_end(s);
}

static void* sleeper(void* arg) {
  (void)arg;
  sleep_tid = (pid_t)syscall(SYS_gettid);
  sleep_in_sleeper(&sleep_span);
  return NULL;
}

static void* reader(void* arg) {
  (void)arg;
  read_in_reader(&read_span);
  return NULL;
}

static void* writer(void* arg) {
  (void)arg;
  write_from_writer();
  return NULL;
}

static void* vforker(void* arg) {
  (void)arg;
  wait_in_vfork(&vfork_span);
  return NULL;
}

static double spin_seconds;
static uint64_t run_delay_ns; /* summed over the spinning threads as each ends */
/* The lone thread's sleeps past their 9 ms: from the timer's expiry (its wake-up) to running
 * again, and the timer's slack: the most a tracer's wake-up-to-run time can be. */
static uint64_t oversleep_ns;

/* The calling thread's time spent runnable but waiting for a CPU, as the scheduler counts
 * it (schedstat's second field): what a machine's other load adds is in it too, so a test
 * compares loupe's run-queue latency with this rather than with an idle machine's. Read
 * at a thread's start too: the wait between its creation and its first run has no
 * wake-up and no switch-out before it, so no tracer of switches sees it. */
static uint64_t own_run_delay(void) {
  unsigned long long on_cpu = 0, delay = 0;
  FILE* f = fopen("/proc/thread-self/schedstat", "r");

  if (!f) return 0;
  if (fscanf(f, "%llu %llu", &on_cpu, &delay) != 2) delay = 0;
  fclose(f);
  return delay;
}

/* Each spinning thread's time off the CPU, for any reason (its wall minus its CPU time):
 * no tracer can find more run-queue wait than that. */
static uint64_t off_cpu_ns;

struct thread_start {
  uint64_t delay, wall, cpu;
};

static struct thread_start thread_start(void) {
  struct thread_start t = {own_run_delay(), now_ns(), thread_cpu_ns()};

  return t;
}

static void thread_end(const struct thread_start* t) {
  __atomic_fetch_add(&run_delay_ns, own_run_delay() - t->delay, __ATOMIC_RELAXED);
  __atomic_fetch_add(&off_cpu_ns, (now_ns() - t->wall) - (thread_cpu_ns() - t->cpu),
                     __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void* spin_on_cpu(void* arg) {
  struct thread_start t0 = thread_start();
  cpu_set_t set;
  volatile uint64_t x = 0;
  uint64_t end = now_ns() + (uint64_t)(spin_seconds * 1e9);

  CPU_ZERO(&set);
  CPU_SET((int)(intptr_t)arg, &set);
  sched_setaffinity(0, sizeof(set), &set);
  while (now_ns() < end)
    for (int i = 0; i < 10000; i++) x += (uint64_t)i;
  thread_end(&t0);
  return NULL;
}

__attribute__((noinline)) static void* spin_in_crowd(void* arg) {
  return spin_on_cpu(arg);
}

/* Alone on its CPU and mostly asleep: 1 ms of work every 10 ms. It waits for a CPU only
 * when woken, and a woken sleeper is run at once unless the CPU is busy with others. */
__attribute__((noinline)) static void* spin_alone(void* arg) {
  struct thread_start t0 = thread_start();
  cpu_set_t set;
  volatile uint64_t x = 0;
  uint64_t end = now_ns() + (uint64_t)(spin_seconds * 1e9);

  CPU_ZERO(&set);
  CPU_SET((int)(intptr_t)arg, &set);
  sched_setaffinity(0, sizeof(set), &set);
  while (now_ns() < end) {
    uint64_t burst = now_ns() + 1000000;

    while (now_ns() < burst)
      for (int i = 0; i < 1000; i++) x += (uint64_t)i;
    uint64_t t0 = now_ns();

    sleep_ms(9);
    oversleep_ns += now_ns() - t0 - 9000000;
  }
  thread_end(&t0);
  return NULL;
}

/* How many times the calling thread was given a CPU (schedstat's third field). */
static uint64_t own_runs(void) {
  unsigned long long on_cpu = 0, delay = 0, runs = 0;
  FILE* f = fopen("/proc/thread-self/schedstat", "r");

  if (!f) return 0;
  if (fscanf(f, "%llu %llu %llu", &on_cpu, &delay, &runs) != 3) runs = 0;
  fclose(f);
  return runs;
}

/* The main thread's runs before it pinned itself: each followed a wait on whichever CPU
 * it was on (an emulated kernel under load preempts an exec many times). */
static uint64_t runs_before_pin;

static void spin_threads(int n, int cpu, void* (*fn)(void*)) {
  pthread_t t[8];
  cpu_set_t set;

  /* The main thread and so every thread it starts (which inherit its affinity) run on
   * `cpu` from their first instruction: a thread that started elsewhere and pinned itself
   * would wait once on another CPU's run queue first (an emulated kernel, slow to switch,
   * made 43 of a crowd's 269 waits such). */
  runs_before_pin = own_runs();
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
  for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, fn, (void*)(intptr_t)cpu);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

/* Half on the CPU, half off: spins 1 s of its own CPU time, then sleeps 1 s. */
__attribute__((noinline)) static uint64_t spin_half(void) {
  struct timespec a, b;
  volatile uint64_t x = 0;
  long long used = 0;

  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  do {
    for (int i = 0; i < 100000; i++) x += (uint64_t)i;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    used = (b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec);
  } while (used < 1000000000ll);
  return (uint64_t)used;
}

__attribute__((noinline)) static uint64_t sleep_half(void) {
  uint64_t t0 = now_ns();

  for (int i = 0; i < 10; i++) sleep_ms(100);
  return now_ns() - t0;
}

static int ping_fds[2], pong_fds[2];

static void pin_to_cpu0(void) {
  cpu_set_t set;

  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

__attribute__((noinline)) static void* ponger(void* arg) {
  char c;

  (void)arg;
  pin_to_cpu0();
  while (read(ping_fds[0], &c, 1) == 1)
    if (write(pong_fds[1], &c, 1) != 1) break;
  return NULL;
}

__attribute__((noinline)) static unsigned long long pingpong(double seconds) {
  uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
  unsigned long long n = 0;
  pthread_t t;
  char c = 'x';

  if (pipe(ping_fds) != 0 || pipe(pong_fds) != 0) exit(2);
  pin_to_cpu0();
  pthread_create(&t, NULL, ponger, NULL);
  while (now_ns() < end) {
    if (write(ping_fds[1], &c, 1) != 1 || read(pong_fds[0], &c, 1) != 1) exit(3);
    n++;
  }
  close(ping_fds[1]);
  pthread_join(t, NULL);
  return n;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "pingpong") == 0) {
    printf("round_trips=%llu\n", pingpong(atof(argv[2])));
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "halves") == 0) {
    uint64_t cpu = spin_half();
    uint64_t off = sleep_half();

    printf("spin_cpu_ns=%llu sleep_ns=%llu\n", (unsigned long long)cpu, (unsigned long long)off);
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "blockers") == 0) {
    pthread_t t[4];

    if (pipe(pipe_fds) != 0) return 2;
    pthread_create(&t[0], NULL, sleeper, NULL);
    pthread_create(&t[1], NULL, reader, NULL);
    pthread_create(&t[2], NULL, writer, NULL);
    pthread_create(&t[3], NULL, vforker, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf(
        "pid=%d sleep_ns=%llu sleep_cpu_ns=%llu read_ns=%llu read_cpu_ns=%llu vfork_ns=%llu "
        "vfork_cpu_ns=%llu sleep_tid=%d\n",
        (int)getpid(), (unsigned long long)sleep_span.wall, (unsigned long long)sleep_span.cpu,
        (unsigned long long)read_span.wall, (unsigned long long)read_span.cpu,
        (unsigned long long)vfork_span.wall, (unsigned long long)vfork_span.cpu, (int)sleep_tid);
    return 0;
  }
  if (argc >= 3 && (strcmp(argv[1], "crowd") == 0 || strcmp(argv[1], "lone") == 0)) {
    struct thread_start main_t0 = thread_start(); /* the main thread's waits count too */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    spin_seconds = atof(argv[2]);
    printf("%s_pid=%d\n", argv[1], (int)getpid());
    fflush(stdout);
    if (strcmp(argv[1], "crowd") == 0)
      spin_threads(3, 0, spin_in_crowd);
    else
      spin_threads(1, ncpu > 1 ? (int)ncpu - 1 : 0, spin_alone);
    thread_end(&main_t0);
    printf("%s_run_delay_ns=%llu %s_off_cpu_ns=%llu oversleep_ns=%llu %s_runs_before_pin=%llu\n",
           argv[1], (unsigned long long)run_delay_ns, argv[1], (unsigned long long)off_cpu_ns,
           (unsigned long long)oversleep_ns, argv[1], (unsigned long long)runs_before_pin);
    return 0;
  }
  fprintf(stderr, "usage: %s blockers | halves | crowd SECONDS | lone SECONDS\n", argv[0]);
  return 2;
}
