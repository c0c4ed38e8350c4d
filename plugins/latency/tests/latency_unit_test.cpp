// SPDX-License-Identifier: Apache-2.0
//
// Unit tests of the latency plugin's helpers: target parsing, library and symbol resolution
// (the SDK's ELF lookup on the workload), and the mechanism choice with its error messages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "latency.h"
#include "latency_fake_host.hpp"
#include "library_resolver.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/uprobe.hpp"
#include "probe_spec.hpp"
#include "target_resolver.hpp"

using namespace loupe::latency;
using loupe::sdk::find_elf_function;

namespace {

TargetFields ufunc(const char* s) {
  return TargetFields{std::nullopt, std::nullopt, s};
}

std::string error_of(const TargetFields& f) {
  try {
    parse_target(f, 2);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(LatencyProbeSpec, ParsesEveryKind) {
  TargetFields k;
  k.kfunc = "vfs_read";
  auto t = parse_target(k, 0);
  EXPECT_EQ(t.kind, TargetKind::kKernelFunction);
  EXPECT_EQ(t.kernel_function, "vfs_read");
  EXPECT_EQ(t.name, "vfs_read");

  t = parse_target(ufunc("libc:malloc"), 0);
  EXPECT_EQ(t.kind, TargetKind::kUserFunction);
  EXPECT_EQ(t.binary, "libc");
  EXPECT_EQ(t.symbol, "malloc");
  EXPECT_EQ(t.symbol_offset, 0u);

  t = parse_target(ufunc("/opt/my:app/bin:handle+0x10"), 0);
  EXPECT_EQ(t.binary, "/opt/my:app/bin");  // split at the last ':'
  EXPECT_EQ(t.symbol, "handle");
  EXPECT_EQ(t.symbol_offset, 16u);

  TargetFields s;
  s.syscall = "sys_read";
  s.name = "reads";
  t = parse_target(s, 0);
  EXPECT_EQ(t.kind, TargetKind::kSyscall);
  EXPECT_EQ(t.name, "reads");
  EXPECT_EQ(t.entry.full(), "syscalls:sys_enter_read");
  EXPECT_EQ(t.exit.full(), "syscalls:sys_exit_read");

  TargetFields tp;
  tp.tracepoint_entry = "block:block_rq_issue";
  tp.tracepoint_exit = "block:block_rq_complete";
  t = parse_target(tp, 0);
  EXPECT_EQ(t.kind, TargetKind::kTracepointPair);
  EXPECT_EQ(t.entry.category, "block");
  EXPECT_EQ(t.exit.name, "block_rq_complete");
  EXPECT_EQ(t.name, "block_rq_issue");
}

TEST(LatencyProbeSpec, RejectsBadShapesWithTheTargetNamed) {
  TargetFields none;
  EXPECT_NE(error_of(none).find("targets[2]: set exactly one of"), std::string::npos);
  TargetFields two;
  two.kfunc = "vfs_read";
  two.syscall = "read";
  EXPECT_NE(error_of(two).find("found 2"), std::string::npos);
  EXPECT_NE(error_of(ufunc("malloc")).find("binary:symbol"), std::string::npos);
  EXPECT_NE(error_of(ufunc("libc:")).find("binary:symbol"), std::string::npos);
  EXPECT_NE(error_of(ufunc("libc:malloc+x1")).find("bad offset"), std::string::npos);
  EXPECT_NE(error_of(ufunc("libc:malloc+-1")).find("bad offset"), std::string::npos);
  TargetFields half;
  half.tracepoint_entry = "syscalls:sys_enter_read";
  EXPECT_NE(error_of(half).find("needs both"), std::string::npos);
  TargetFields badtp;
  badtp.tracepoint_entry = "sys_enter_read";
  badtp.tracepoint_exit = "syscalls:sys_exit_read";
  EXPECT_NE(error_of(badtp).find("category:name"), std::string::npos);
  TargetFields named;
  named.name = "slow";
  EXPECT_NE(error_of(named).find("('slow')"), std::string::npos);
}

TEST(LatencyProbeSpec, UsdtPairsAndSingleProbes) {
  TargetFields p;
  p.usdt_entry = "/opt/a:b/python3.11:python:gc__start";
  p.usdt_exit = "/opt/a:b/python3.11:python:gc__done";
  auto t = parse_target(p, 0);
  EXPECT_EQ(t.kind, TargetKind::kUsdtPair);
  EXPECT_EQ(t.binary, "/opt/a:b/python3.11");  // split at the last two ':'
  EXPECT_EQ(t.usdt_entry.full(), "python:gc__start");
  EXPECT_EQ(t.usdt_exit.name, "gc__done");
  EXPECT_EQ(t.name, "gc__start");
  TargetFields c;
  c.usdt = "libpython3.11:python:line";
  t = parse_target(c, 0);
  EXPECT_EQ(t.kind, TargetKind::kUsdtCount);
  EXPECT_EQ(t.usdt_entry.binary, "libpython3.11");

  TargetFields half;
  half.usdt_entry = p.usdt_entry;
  EXPECT_NE(error_of(half).find("needs both usdt_entry and usdt_exit"), std::string::npos);
  TargetFields two_bins;
  two_bins.usdt_entry = "/a:p:x";
  two_bins.usdt_exit = "/b:p:y";
  EXPECT_NE(error_of(two_bins).find("two binaries"), std::string::npos);
  for (const char* bad :
       {"python:gc__start", ":python:x", "/bin/x:python:", "/bin/x::x", "/bin/x:py-thon:x"}) {
    TargetFields b;
    b.usdt = bad;
    EXPECT_NE(error_of(b).find("USDT probe"), std::string::npos) << bad;
  }
}

TEST(LatencyLibraryResolver, PrefersThisArchitecturesRuntimeSoname) {
  const std::string cache =
      "1234 libs found in cache `/etc/ld.so.cache'\n"
      "\tlibcrypt.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcrypt.so.1\n"
      "\tlibc.so.6 (libc6) => /lib/i386-linux-gnu/libc.so.6\n"
      "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"
      "\tlibc.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libc.so\n";
  LibraryResolver r(cache, {});
  // canonical() leaves the text alone when the file is absent; present here anyway.
  std::string libc = r.resolve("libc");
  EXPECT_NE(libc.find("x86_64-linux-gnu/libc.so.6"), std::string::npos) << libc;
  EXPECT_EQ(r.resolve("c"), libc);
  EXPECT_EQ(r.resolve("libc.so.6"), libc);
  EXPECT_THROW(r.resolve("libdoesnotexist"), std::runtime_error);
  try {
    r.resolve("/no/such/file");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos);
  }
}

TEST(LatencyLibraryResolver, FindsLibcOnThisSystem) {
  auto r = LibraryResolver::from_system();
  std::string libc = r.resolve("libc");
  EXPECT_NE(libc.find("libc.so"), std::string::npos) << libc;
  EXPECT_NE(r.resolve("sh").find("/"), std::string::npos);  // from PATH
}

TEST(LatencyElfSymbols, ResolvesWorkloadFunctionsToFileOffsets) {
  auto f = find_elf_function(LATENCY_WORKLOAD, "lat_sleep_3ms");
  EXPECT_GT(f.size, 0u);
  EXPECT_FALSE(f.from_dynsym);
  // A PIE's text segment maps at file offset == vaddr; the offset must lie in the file.
  EXPECT_GT(f.file_offset, 0u);
  auto g = find_elf_function(LATENCY_WORKLOAD, "lat_sleep_3ms", 4);
  EXPECT_EQ(g.file_offset, f.file_offset + 4);
  EXPECT_THROW(find_elf_function(LATENCY_WORKLOAD, "lat_sleep_3ms", f.size), std::runtime_error);
  try {
    find_elf_function(LATENCY_WORKLOAD, "no_such_function");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos);
  }
  // usleep is referenced by the workload but defined in libc.
  try {
    find_elf_function(LATENCY_WORKLOAD, "usleep");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("libc:usleep"), std::string::npos) << e.what();
  }
  auto libc = LibraryResolver::from_system().resolve("libc");
  EXPECT_GT(find_elf_function(libc, "malloc").file_offset, 0u);
  try {
    find_elf_function(libc, "memcpy");  // an IFUNC in glibc
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("IFUNC"), std::string::npos) << e.what();
  }
}

// Probe sites are named from the file (no process): the function holding an address, the
// offset into it, and the file offset a uprobe at it sits on, as find_elf_function gives.
TEST(LatencyElfSymbols, NamesAddressesByTheFunctionHoldingThem) {
  auto f = loupe::sdk::find_elf_function(LATENCY_WORKLOAD, "lat_spin_2us");
  auto libc = LibraryResolver::from_system().resolve("libc");
  auto m = loupe::sdk::find_elf_function(libc, "malloc");
  auto a = loupe::sdk::describe_elf_addresses(LATENCY_WORKLOAD,
                                              {f.address, f.address + 5, f.address + f.size});
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].site(), "lat_spin_2us+0x0");
  EXPECT_EQ(a[1].site(), "lat_spin_2us+0x5");
  EXPECT_EQ(a[1].file_offset, f.file_offset + 5);
  EXPECT_NE(a[2].function, "lat_spin_2us");  // past its end: another function, or none
  // A shared library, named as it is traced (libc:malloc).
  auto b = loupe::sdk::describe_elf_addresses(libc, {m.address + 1});
  EXPECT_EQ(b[0].site(), "malloc+0x1");
  EXPECT_EQ(b[0].file_offset, m.file_offset + 1);
  // No executable segment holds address 0.
  EXPECT_FALSE(loupe::sdk::describe_elf_addresses(LATENCY_WORKLOAD, {0})[0].file_offset);
}

TEST(LatencyTargetResolver, KernelFunctionWithoutFentryOrKprobesSaysWhyAndSuggestsATracepoint) {
  loupe::test::FakeHost fake;
  fake.features["fentry"] = 0;
  fake.features["kprobe"] = 0;
  loupe::sdk::Host host(fake.services());
  auto libs = LibraryResolver::from_system();
  TargetResolver r(host, libs, LAT_FENTRY_SLOTS);
  TargetFields f;
  f.kfunc = "vfs_read";
  try {
    r.resolve(parse_target(f, 0));
    FAIL() << "vfs_read resolved without fentry or kprobes";
  } catch (const loupe::sdk::Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.status(), LOUPE_ERR_UNSUPPORTED);
    EXPECT_NE(m.find("target 'vfs_read' (kfunc = \"vfs_read\")"), std::string::npos) << m;
    EXPECT_NE(m.find("fentry/fexit unavailable (forced off by the test)"), std::string::npos) << m;
    EXPECT_NE(m.find("kprobe/kretprobe unavailable"), std::string::npos) << m;
    EXPECT_NE(m.find("syscall = \"read\""), std::string::npos) << m;
  }
  f.kfunc = "no_such_kernel_function_xyz";
  try {
    r.resolve(parse_target(f, 0));
    FAIL();
  } catch (const loupe::sdk::Error& e) {
    EXPECT_EQ(e.status(), LOUPE_ERR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("/proc/kallsyms"), std::string::npos);
  }
}

TEST(LatencyTargetResolver, PicksFentryThenKprobe) {
  loupe::test::FakeHost fake;
  loupe::sdk::Host host(fake.services());
  auto libs = LibraryResolver::from_system();
  TargetResolver r(host, libs, 1);
  TargetFields f;
  f.kfunc = "vfs_read";
  auto a = r.resolve(parse_target(f, 0));
  EXPECT_EQ(a.mechanism, Mechanism::kFentry);
  EXPECT_EQ(a.fentry_slot, 0);
  auto b = r.resolve(parse_target(f, 1));  // slots exhausted
  EXPECT_EQ(b.mechanism, Mechanism::kKprobe);
}

TEST(LatencyTargetResolver, UserFunctionsAndSyscalls) {
  loupe::test::FakeHost fake;
  loupe::sdk::Host host(fake.services());
  auto libs = LibraryResolver::from_system();
  TargetResolver r(host, libs, 0);
  auto u = r.resolve(parse_target(ufunc(LATENCY_WORKLOAD ":lat_spin_2us"), 0));
  EXPECT_EQ(u.mechanism, Mechanism::kUprobe);
  EXPECT_EQ(u.file_offset, find_elf_function(LATENCY_WORKLOAD, "lat_spin_2us").file_offset);
  try {
    r.resolve(parse_target(ufunc(LATENCY_WORKLOAD ":nope"), 0));
    FAIL();
  } catch (const loupe::sdk::Error& e) {
    EXPECT_EQ(e.status(), LOUPE_ERR_NOT_FOUND);
  }
  if (::access("/sys/kernel/tracing/events/syscalls", F_OK) != 0)
    GTEST_SKIP() << "tracefs not mounted (or no syscall tracepoints): syscall checks skipped";
  TargetFields s;
  s.syscall = "nanosleep";
  EXPECT_EQ(r.resolve(parse_target(s, 0)).mechanism, Mechanism::kTracepoint);
  s.syscall = "no_such_syscall";
  try {
    r.resolve(parse_target(s, 0));
    FAIL();
  } catch (const loupe::sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sys_enter_no_such_syscall does not exist"),
              std::string::npos);
  }
}
