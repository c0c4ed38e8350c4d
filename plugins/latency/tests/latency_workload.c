// SPDX-License-Identifier: Apache-2.0
//
// A workload with known latency behaviour for the latency profiler's tests. Built -O0,
// with symbols, every traced function noinline so uprobes see each call.
//
//   latency_workload N M R D K
//     N calls of lat_sleep_3ms()    (each ~3 ms: usleep -> clock_nanosleep)
//     M calls of lat_spin_2us()     (each ~2 us of busy CPU, no syscall)
//     R calls of lat_recurse(D)     (D nested levels of the same function)
//     K nanosleep(2) syscalls of ~5 ms (the raw syscall, not clock_nanosleep)
//   latency_workload N M R D K exit-inside
//     the same, then exits from inside lat_exit_inside(): an entry whose exit never comes
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) void lat_sleep_3ms(void)
{
	usleep(3000);
}

__attribute__((noinline)) void lat_spin_2us(void)
{
	unsigned long long end = now_ns() + 2000;

	while (now_ns() < end)
		;
}

__attribute__((noinline)) int lat_recurse(int depth)
{
	volatile int x = depth;

	if (depth > 1)
		x += lat_recurse(depth - 1);
	return x;
}

__attribute__((noinline)) void lat_exit_inside(void)
{
	exit(0);
}

static void nanosleep_5ms(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 5000000 };

	syscall(SYS_nanosleep, &ts, NULL);
}

int main(int argc, char **argv)
{
	long n, m, r, d, k, i;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: %s N M R D K [exit-inside]\n", argv[0]);
		return 2;
	}
	n = atol(argv[1]);
	m = atol(argv[2]);
	r = atol(argv[3]);
	d = atol(argv[4]);
	k = atol(argv[5]);
	for (i = 0; i < n; i++)
		lat_sleep_3ms();
	for (i = 0; i < m; i++)
		lat_spin_2us();
	for (i = 0; i < r; i++)
		lat_recurse((int)d);
	for (i = 0; i < k; i++)
		nanosleep_5ms();
	if (argc == 7)
		lat_exit_inside();
	return 0;
}
