// SPDX-License-Identifier: Apache-2.0
//
// A process that JITs like V8 --perf-prof or the JVM's perf agent do: it puts code in
// anonymous executable memory, logs it to $LOUPE_JD_DIR/jit-PID.dump (default /tmp) in
// perf's jitdump format, and maps that file PROT_READ|PROT_EXEC so that profilers find it
// in /proc/PID/maps. Prints the code's address, then waits to be killed. The test appends
// further records (moves, loads) to the file itself.
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define JD_MACH EM_X86_64
#elif defined(__aarch64__)
#define JD_MACH EM_AARCH64
#else
#define JD_MACH EM_NONE
#endif

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put(int fd, const void* p, size_t n) {
  if (write(fd, p, n) != (ssize_t)n) {
    perror("jitdump write");
    exit(1);
  }
}

int main(void) {
  const size_t region_size = 65536, code_size = 64;
  uint8_t* region =
      mmap(NULL, region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return 1;
  uint8_t* code = region + 0x100;
  memset(code, 0xc3, code_size);  // never run: only its address matters
  if (mprotect(region, region_size, PROT_READ | PROT_EXEC) != 0) return 1;

  const char* dir = getenv("LOUPE_JD_DIR");
  char path[4096];
  snprintf(path, sizeof(path), "%s/jit-%d.dump", dir && *dir ? dir : "/tmp", (int)getpid());
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  struct {
    uint32_t magic, version, total_size, elf_mach, pad1, pid;
    uint64_t timestamp, flags;
  } header = {0x4A695444, 1, sizeof(header), JD_MACH, 0, (uint32_t)getpid(), now_ns(), 0};
  put(fd, &header, sizeof(header));

  static const char name[] = "jd_hot_function";
  struct {
    uint32_t id, total_size;
    uint64_t timestamp;
    uint32_t pid, tid;
    uint64_t vma, code_addr, code_size, code_index;
  } load = {0,
            0,
            now_ns(),
            (uint32_t)getpid(),
            (uint32_t)syscall(SYS_gettid),
            (uint64_t)(uintptr_t)code,
            (uint64_t)(uintptr_t)code,
            code_size,
            0};
  load.total_size = (uint32_t)(sizeof(load) + sizeof(name) + code_size);
  put(fd, &load, sizeof(load));
  put(fd, name, sizeof(name));
  put(fd, code, code_size);

  // What perf's jvmti agent does so that `perf inject --jit` finds the file.
  void* marker =
      mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (marker == MAP_FAILED) perror("mmap jitdump");
  close(fd);

  printf("jd_hot_function %p\n", (void*)code);
  printf("jit_region %p\n", (void*)region);
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}
