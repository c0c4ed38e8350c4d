// SPDX-License-Identifier: Apache-2.0
//
// Unit tests of the SDK's user-space twins of the BPF helpers (loupe/sdk/target_filter.hpp,
// histogram.hpp, percpu.hpp, library.hpp, uprobe.hpp, perf_event.hpp): no BPF object; only
// the per-CPU map test needs root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "latency_fake_host.hpp"
#include "loupe/sdk/eviction.hpp"
#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/library.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/perf_event.hpp"
#include "loupe/sdk/stack_map.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/thinning.hpp"
#include "loupe/sdk/uprobe.hpp"

namespace fs = std::filesystem;
namespace sdk = loupe::sdk;

namespace {

// This machine's hybrid layout: cgroup v1 controllers under a tmpfs at /sys/fs/cgroup and
// the cgroup2 hierarchy at /sys/fs/cgroup/unified.
const char* kHybridMountinfo =
    "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime shared:9 - cgroup cgroup rw,name=systemd\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n";

// A scratch tree standing in for a cgroup2 mount: <root>/cg/system.slice/x.service.
class SdkCgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/loupe-sdk-cg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    mount_ = root_ + "/cg";
    fs::create_directories(mount_ + "/system.slice/x.service");
    mountinfo_ =
        "30 22 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
        "40 30 0:37 / " +
        mount_ + " rw - cgroup2 cgroup2 rw\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::uint64_t ino(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_ino;
  }
  std::string error_of(const std::string& text, const std::string& mountinfo) {
    try {
      sdk::resolve_cgroup_id(text, mountinfo);
    } catch (const sdk::Error& e) {
      EXPECT_EQ(e.status(), LOUPE_ERR_NOT_FOUND);
      return e.what();
    }
    return "";
  }
  std::string root_, mount_, mountinfo_;
};

struct FakeRodata {
  volatile std::uint32_t loupe_filter_tgid = 0;
  volatile std::uint32_t loupe_filter_tid = 0;
  volatile std::uint64_t loupe_filter_cgroup = 0;
  volatile char loupe_filter_comm[16] = {};
  volatile bool loupe_filter_comm_on = false;
  volatile std::uint32_t loupe_filter_not_tgid = 0;
};

}  // namespace

TEST(SdkTargetFilter, KeysAreDeclaredOnceAndAppendToAPluginSchema) {
  constexpr loupe_config_key own[] = {{"top", LOUPE_CFG_INT, 0, "10", "rows", 1, 100}};
  constexpr auto keys = sdk::concat_keys(own, sdk::kTargetFilterKeys);
  static_assert(keys.size() == 5);
  EXPECT_STREQ(keys[0].name, "top");
  EXPECT_STREQ(keys[1].name, "pid");
  EXPECT_STREQ(keys[2].name, "tid");
  EXPECT_STREQ(keys[3].name, "comm");
  EXPECT_STREQ(keys[4].name, "cgroup");
  constexpr auto some = sdk::concat_keys(own, sdk::kPidKey, sdk::kCgroupKey);
  static_assert(some.size() == 3);
  EXPECT_STREQ(some[2].name, "cgroup");
}

TEST(SdkTargetFilter, Cgroup2MountsFromMountinfo) {
  EXPECT_EQ(sdk::cgroup2_mounts(kHybridMountinfo),
            (std::vector<std::string>{"/sys/fs/cgroup/unified"}));
  EXPECT_TRUE(sdk::cgroup2_mounts("30 22 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n").empty());
  EXPECT_EQ(sdk::cgroup2_mounts("40 30 0:37 / /mnt/my\\040cg rw - cgroup2 none rw\n"),
            (std::vector<std::string>{"/mnt/my cg"}));
}

// "system.slice" is relative to the cgroup2 mount: joined with a slash, wherever the mount
// is (latency joined it to /sys/fs/cgroup without one, cpusample assumed /sys/fs/cgroup).
TEST_F(SdkCgroupTree, RelativeNamesResolveAgainstTheCgroup2Mount) {
  const std::uint64_t slice = ino(mount_ + "/system.slice");
  EXPECT_EQ(sdk::resolve_cgroup_id("system.slice", mountinfo_), slice);
  EXPECT_EQ(sdk::resolve_cgroup_id("/system.slice", mountinfo_),
            slice);  // as /proc/PID/cgroup shows it
  EXPECT_EQ(sdk::resolve_cgroup_id("system.slice/x.service", mountinfo_),
            ino(mount_ + "/system.slice/x.service"));
  EXPECT_EQ(sdk::resolve_cgroup_id(mount_ + "/system.slice", mountinfo_), slice);  // absolute
  EXPECT_EQ(sdk::resolve_cgroup_id(mount_, mountinfo_), ino(mount_));
  EXPECT_EQ(sdk::resolve_cgroup_id("4242", mountinfo_), 4242u);  // an id, taken as is
}

TEST_F(SdkCgroupTree, MissingCgroupOrNoCgroup2SaysWhy) {
  std::string m = error_of("nope.slice", mountinfo_);
  EXPECT_NE(m.find("cgroup 'nope.slice': " + mount_ + "/nope.slice is not a cgroup v2 directory"),
            std::string::npos)
      << m;
  m = error_of("system.slice", "30 22 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n");
  EXPECT_NE(m.find("no cgroup v2 file system is mounted"), std::string::npos) << m;
}

TEST(SdkTargetFilter, ReadsChecksAndWritesTheRodataKnobs) {
  loupe::test::FakeHost host;
  loupe_config conf;
  conf.values["tid"] = std::int64_t{7};
  conf.values["comm"] = std::string("worker");
  sdk::Config cfg(host.services(), &conf);
  loupe_session_info session{};
  session.size = sizeof(session);
  session.target_pid = 1234;
  FakeRodata ro;
  auto f = sdk::apply_target_filter(cfg, &session, &ro);
  EXPECT_EQ(f.pid, 1234u);  // pid 0 = the session's target
  EXPECT_EQ(ro.loupe_filter_tgid, 1234u);
  EXPECT_EQ(ro.loupe_filter_tid, 7u);
  EXPECT_EQ(ro.loupe_filter_cgroup, 0u);
  EXPECT_TRUE(ro.loupe_filter_comm_on);
  EXPECT_STREQ(const_cast<const char*>(ro.loupe_filter_comm), "worker");
  EXPECT_EQ(ro.loupe_filter_not_tgid, 0u) << "a target: loupe is not in it anyway";

  // Without a target, loupe's own process is left out of what it profiles.
  loupe_session_info whole{};
  whole.size = sizeof(whole);
  FakeRodata all;
  sdk::apply_target_filter(cfg, &whole, &all);
  EXPECT_EQ(all.loupe_filter_tgid, 0u);
  EXPECT_EQ(all.loupe_filter_not_tgid, static_cast<std::uint32_t>(::getpid()));

  conf.values["pid"] = std::int64_t{99};  // names another process than the session's
  EXPECT_THROW(sdk::read_target_filter(cfg, &session), sdk::Error);
  conf.values["pid"] = std::int64_t{0};
  conf.values["comm"] = std::string("a-command-name-too-long");
  try {
    sdk::read_target_filter(cfg, &session);
    FAIL() << "a 23-character comm was accepted";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.status(), LOUPE_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("is longer than 15 characters"), std::string::npos);
  }
}

// The process tree: followed only when the host says so (LOUPE_SESSION_TREE, a field it
// has), for the session's own target, and through the skeleton (rodata cannot reach the
// map); uprobes then go system-wide.
TEST(SdkTargetFilter, TreeFollowedOnlyWithTheFlagForTheSessionTarget) {
  loupe::test::FakeHost host;
  loupe_config conf;
  sdk::Config cfg(host.services(), &conf);
  loupe_session_info session{};
  session.size = sizeof(session);
  session.target_pid = 1234;
  auto f = sdk::read_target_filter(cfg, &session);  // zero-filled: fd 0 is not a map
  EXPECT_EQ(f.tree_fd, -1);
  EXPECT_FALSE(f.follows_tree());
  EXPECT_EQ(f.uprobe_pid(), 1234);

  session.flags = LOUPE_SESSION_TREE;
  session.tree_map_fd = 42;
  f = sdk::read_target_filter(cfg, &session);
  EXPECT_EQ(f.tree_fd, 42);
  EXPECT_TRUE(f.follows_tree());
  EXPECT_EQ(f.uprobe_pid(), -1);  // children reach the uprobe only system-wide

  FakeRodata ro;  // the pre-tree form: this process only
  f = sdk::apply_target_filter(cfg, &session, &ro);
  EXPECT_EQ(f.tree_fd, -1);
  EXPECT_EQ(f.uprobe_pid(), 1234);
  EXPECT_EQ(ro.loupe_filter_tgid, 1234u);

  loupe_session_info old = session;  // a host older than the field
  old.size = offsetof(loupe_session_info, tree_map_fd);
  EXPECT_EQ(sdk::read_target_filter(cfg, &old).tree_fd, -1);

  session.target_pid = 0;  // system-wide session, a pid of the plugin's own: no tree
  conf.values["pid"] = std::int64_t{55};
  f = sdk::read_target_filter(cfg, &session);
  EXPECT_EQ(f.tree_fd, -1);
  EXPECT_EQ(f.uprobe_pid(), 55);
  conf.values["pid"] = std::int64_t{0};
  EXPECT_EQ(sdk::read_target_filter(cfg, &session).uprobe_pid(), -1);  // everything
}

// ceil(log2(v)) by repeated doubling: Prometheus' schema-0 bucket index of v >= 1, found
// without the bit tricks the slot functions use.
static int native_index(std::uint64_t v) {
  int k = 0;
  for (unsigned __int128 p = 1; p < v; p *= 2) ++k;
  return k;
}

TEST(SdkHistogram, SlotBoundsInvertTheBpfSlotFunctions) {
  EXPECT_EQ(sdk::log2_slot_bounds(0).lower, 0u);  // {0} alone
  EXPECT_EQ(sdk::log2_slot_bounds(0).upper, 1u);
  EXPECT_EQ(sdk::log2_slot_bounds(1).lower, 1u);  // {1} = (0.5, 1]
  EXPECT_EQ(sdk::log2_slot_bounds(1).upper, 2u);
  EXPECT_EQ(sdk::log2_slot_bounds(12).lower, 1025u);  // (1024, 2048]
  EXPECT_EQ(sdk::log2_slot_bounds(12).upper, 2049u);
  EXPECT_EQ(sdk::log2_slot_bounds(65).lower, (1ull << 63) + 1);
  EXPECT_EQ(sdk::log2_slot_bounds(65).upper, UINT64_MAX);
  EXPECT_EQ(sdk::log2_slot_bounds(5, 6).upper, UINT64_MAX);  // a smaller histogram's last slot
  // A power of two is the inclusive top of its slot, one more opens the next: the side
  // Prometheus and OpenTelemetry count. Slot i is their bucket index i - 1.
  std::vector<std::uint64_t> values{0,
                                    1,
                                    2,
                                    3,
                                    4,
                                    5,
                                    7,
                                    8,
                                    9,
                                    15,
                                    16,
                                    17,
                                    1000,
                                    1023,
                                    1024,
                                    1025,
                                    2047,
                                    2048,
                                    2049,
                                    3000000,
                                    5000000,
                                    (1ull << 40) + 12345,
                                    (1ull << 63),
                                    (1ull << 63) + 1,
                                    UINT64_MAX - 1,
                                    UINT64_MAX};
  for (int e = 0; e < 64; ++e)
    for (std::int64_t d : {-1, 0, 1}) values.push_back((1ull << e) + static_cast<std::uint64_t>(d));
  for (std::uint64_t v : values) {
    std::uint32_t s = sdk::log2_slot(v);
    if (v > 0) {
      EXPECT_EQ(static_cast<int>(s) - 1, native_index(v)) << v;
    } else {
      EXPECT_EQ(s, 0u);
    }
    auto b = sdk::log2_slot_bounds(s);
    EXPECT_LE(b.lower, v) << v;
    if (b.upper != UINT64_MAX) EXPECT_LT(v, b.upper) << v;
    auto l = sdk::linear_slot_bounds(sdk::linear_slot(v));
    EXPECT_LE(l.lower, v) << v;
    if (l.upper != UINT64_MAX) EXPECT_LT(v, l.upper) << v;
  }
  EXPECT_EQ(sdk::log2_slot(UINT64_MAX), LOUPE_HIST_LOG2_SLOTS - 1u);  // every u64 has a slot
  EXPECT_EQ(sdk::linear_slot(UINT64_MAX), LOUPE_HIST_LINEAR_SLOTS - 1u);
  EXPECT_EQ(sdk::linear_slot(8), 8u);  // one slot per value up to LOUPE_HIST_SUB
  // (8, 16] in eight parts of 1, (16, 32] in eight of 2: [17, 19) is (16, 18].
  EXPECT_EQ(sdk::linear_slot_bounds(sdk::linear_slot(17)).lower, 17u);
  EXPECT_EQ(sdk::linear_slot_bounds(sdk::linear_slot(17)).upper, 19u);
  EXPECT_EQ(sdk::linear_slot(18), sdk::linear_slot(17));
  EXPECT_EQ(sdk::linear_slot(32), sdk::linear_slot(31));  // 32 tops (16, 32]
  EXPECT_EQ(sdk::linear_slot(33), sdk::linear_slot(32) + 1);
  for (std::uint32_t s = 0; s + 1 < LOUPE_HIST_LINEAR_SLOTS; ++s)
    ASSERT_EQ(sdk::linear_slot_bounds(s).upper, sdk::linear_slot_bounds(s + 1).lower) << s;
  for (std::uint32_t s = 0; s + 1 < LOUPE_HIST_LOG2_SLOTS; ++s)
    ASSERT_EQ(sdk::log2_slot_bounds(s).upper, sdk::log2_slot_bounds(s + 1).lower) << s;
}

TEST(SdkHistogram, MergesCpusAndComputesIntervalDeltas) {
  std::vector<loupe_hist> cpus(3);
  std::memset(cpus.data(), 0, sizeof(loupe_hist) * cpus.size());
  cpus[0].count = 2;
  cpus[0].sum = 3000;
  cpus[0].min = 1000;
  cpus[0].max = 2000;
  cpus[0].slots[sdk::log2_slot(1000)] = 1;
  cpus[0].slots[sdk::log2_slot(2000)] = 1;
  cpus[2].count = 1;
  cpus[2].sum = 600;
  cpus[2].min = 600;
  cpus[2].max = 600;
  cpus[2].slots[sdk::log2_slot(600)] = 1;  // cpu 1 saw nothing: its min of 0 must not win
  auto m = sdk::hist_merge_per_cpu<loupe_hist>(cpus);
  EXPECT_EQ(m.count, 3u);
  EXPECT_EQ(m.sum, 3600u);
  EXPECT_EQ(m.min, 600u);
  EXPECT_EQ(m.max, 2000u);
  auto b = sdk::hist_buckets(m);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].lower, 513u);  // (512, 1024]
  EXPECT_EQ(b[0].count, 2u);
  EXPECT_EQ(b[1].lower, 1025u);

  auto later = m;
  later.count += 2;
  later.sum += 9000;
  later.max = 5000;
  later.slots[sdk::log2_slot(5000)] += 2;  // (4096, 8192]
  auto d = sdk::hist_interval_delta(later, m);
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.sum, 9000u);
  EXPECT_EQ(d.min, 4097u);  // the interval's lowest bucket bound
  EXPECT_EQ(d.max, 5000u);  // clamped by the session max
  ASSERT_EQ(sdk::hist_buckets(d).size(), 1u);
}

TEST(SdkHistogram, ASmallerHistogramAndUserSideRecording) {
  struct Small {  // a plugin's own LOUPE_HIST_RECORD-shaped struct
    std::uint64_t count, sum, min, max;
    std::uint64_t slots[8];
  } h{};
  for (std::uint64_t v : {0ull, 3ull, 300ull, 1ull << 40}) sdk::hist_add(h, v);
  EXPECT_EQ(h.count, 4u);
  EXPECT_EQ(h.min, 0u);
  EXPECT_EQ(h.max, 1ull << 40);
  EXPECT_EQ(h.slots[0], 1u);
  EXPECT_EQ(h.slots[3], 1u);  // 3 in (2, 4]
  EXPECT_EQ(h.slots[7], 2u);  // 300 and 2^40 clamp into the last slot
  auto b = sdk::hist_buckets(h);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[2].lower, 33u);
  EXPECT_EQ(b[2].upper, UINT64_MAX);
}

TEST(SdkLibrary, SonamesAndMapsLines) {
  EXPECT_EQ(sdk::soname_prefix("libc"), "libc.so");
  EXPECT_EQ(sdk::soname_prefix("c"), "libc.so");
  EXPECT_EQ(sdk::soname_prefix("libc.so.6"), "libc.so.6");
  EXPECT_TRUE(sdk::soname_matches("libc.so.6", "libc.so"));
  EXPECT_TRUE(sdk::soname_matches("libc-2.28.so", "libc.so"));
  EXPECT_FALSE(sdk::soname_matches("libcrypt.so.1", "libc.so"));
  EXPECT_FALSE(sdk::soname_matches("libc.so.6", "libc.so.7"));
  const std::string maps =
      "55d0c000-55d0d000 r-xp 00001000 08:01 123 /usr/bin/app\n"
      "7f00a000-7f00b000 r-xp 00001000 08:01 456 /usr/lib/x86_64-linux-gnu/libcrypt.so.1\n"
      "7f00c000-7f00d000 r-xp 00028000 08:01 789 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n";
  EXPECT_EQ(sdk::library_in_maps(maps, "libc"), "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(sdk::library_in_maps(maps, "crypt"), "/usr/lib/x86_64-linux-gnu/libcrypt.so.1");
  EXPECT_EQ(sdk::library_in_maps(maps, "libssl"), "");
}

TEST(SdkLibrary, TheTargetsOwnLibcElseLoupesOwn) {
  std::string own = sdk::find_mapped_library(0, "libc");
  ASSERT_FALSE(own.empty());
  EXPECT_EQ(own.rfind("/proc/", 0), std::string::npos) << own;
  // A process in loupe's mount namespace: the path as it is (another namespace's would go
  // through /proc/PID/root).
  EXPECT_TRUE(sdk::same_mount_namespace(getpid()));
  EXPECT_EQ(sdk::find_mapped_library(getpid(), "libc"), own);
  EXPECT_EQ(sdk::locate_library(0, "libc"), own);
  EXPECT_EQ(sdk::locate_library(getpid(), "libc"), own);
  try {
    sdk::locate_library(0, "libno-such-library");
    FAIL();
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.status(), LOUPE_ERR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("libno-such-library.so*"), std::string::npos) << e.what();
  }
}

TEST(SdkUprobe, LibcFunctionsToFileOffsets) {
  std::string libc = sdk::locate_library(0, "libc");
  auto malloc_fn = sdk::find_elf_function(libc, "malloc");
  EXPECT_GT(malloc_fn.file_offset, 0u);
  EXPECT_GT(sdk::find_elf_function(libc, "malloc", 4).file_offset, malloc_fn.file_offset);
  // Two versions of one name at one address (pthread_rwlock_rdlock@GLIBC_2.2.5 and
  // @@GLIBC_2.34 in glibc >= 2.34): the current one is found.
  EXPECT_GT(sdk::find_elf_function(libc, "pthread_rwlock_rdlock").file_offset, 0u);
  try {
    sdk::find_elf_function(libc, "memcpy");  // an IFUNC in glibc
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("IFUNC"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sdk::find_elf_function("/no/such/file", "malloc"), sdk::Error);
}

TEST(SdkPerfEvent, CpuListsAsTheKernelWritesThem) {
  EXPECT_EQ(sdk::parse_cpu_list("0-1\n"), (std::vector<int>{0, 1}));
  EXPECT_EQ(sdk::parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(sdk::parse_cpu_list("0-2,5,7-8"), (std::vector<int>{0, 1, 2, 5, 7, 8}));
  EXPECT_THROW(sdk::parse_cpu_list(""), std::invalid_argument);
  EXPECT_THROW(sdk::parse_cpu_list("a-b"), std::invalid_argument);
  EXPECT_THROW(sdk::parse_cpu_list("3-1"), std::invalid_argument);
  EXPECT_THROW(sdk::parse_cpu_list("1,-2"), std::invalid_argument);
  EXPECT_EQ(static_cast<long>(sdk::online_cpus().size()), sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(sdk::SamplingSpec{}.describe(), "99 Hz");
  EXPECT_EQ((sdk::SamplingSpec{99, 1000000}).describe(), "every 1000000 ns of CPU time");
}

// Needs a real per-CPU map: root (or CAP_BPF).
TEST(SdkPerCpu, CounterStructsAreSummedFieldByField) {
  struct Counters {
    std::uint64_t a, b;
  };
  int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  int fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "sdk_test", sizeof(std::uint32_t),
                          sizeof(Counters), 1, nullptr);
  if (fd < 0) GTEST_SKIP() << "cannot create a per-CPU map (needs root): " << std::strerror(errno);
  std::vector<Counters> per_cpu(static_cast<std::size_t>(ncpu));
  for (int c = 0; c < ncpu; ++c) per_cpu[c] = {static_cast<std::uint64_t>(c + 1), 10};
  std::uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(fd, &zero, per_cpu.data(), BPF_ANY), 0);
  Counters sum = sdk::read_per_cpu_sum<Counters>(fd, &zero);
  EXPECT_EQ(sum.a, static_cast<std::uint64_t>(ncpu * (ncpu + 1) / 2));
  EXPECT_EQ(sum.b, static_cast<std::uint64_t>(10 * ncpu));
  std::uint32_t absent = 7;
  EXPECT_EQ(sdk::read_per_cpu_sum<Counters>(fd, &absent).a, 0u);  // out of range: zero
  ::close(fd);
}

// A stack store as the in-kernel unwinder's slots are (a BPF hash of ids), on a real map:
// root (or CAP_BPF). An evicted key's id goes at once unless a remaining key uses it; an id
// no key references goes only when it was unreferenced at the sweep before too.
TEST(SdkEviction, StackIdsGoWhenNothingUsesThemAndOrphansAtTheSecondSweep) {
  int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "sdk_sweep", sizeof(std::uint32_t),
                          sizeof(std::uint64_t), 64, nullptr);
  if (fd < 0) GTEST_SKIP() << "cannot create a BPF map (needs root): " << std::strerror(errno);
  for (std::uint32_t id = 1; id <= 6; ++id) {
    std::uint64_t hash = id * 1000;
    ASSERT_EQ(bpf_map_update_elem(fd, &id, &hash, BPF_ANY), 0);
  }
  auto present = [&] { return sdk::map_keys<std::uint32_t>(fd).size(); };
  std::set<std::int32_t> unreferenced;

  // Ids 1 and 2 were the evicted keys'; 2 is also a remaining key's. 3 is kept; 4-6 are
  // used by nothing (seen for the first time).
  sdk::StackSweep first;
  first.evicted(fd, 1);
  first.evicted(fd, 2);
  first.orphans(fd, &unreferenced);
  first.kept(fd, 2);
  first.kept(fd, 3);
  auto freed = first.erase();
  EXPECT_EQ(freed[fd], (std::set<std::int32_t>{1}));
  EXPECT_EQ(present(), 5u);
  EXPECT_EQ(unreferenced, (std::set<std::int32_t>{4, 5, 6}));

  // Next sweep: 5 was taken by a key meanwhile; 4 and 6 are still unreferenced: freed.
  // 7 is new and unreferenced: it waits for the next sweep.
  std::uint32_t seven = 7;
  std::uint64_t hash = 7000;
  ASSERT_EQ(bpf_map_update_elem(fd, &seven, &hash, BPF_ANY), 0);
  sdk::StackSweep second;
  second.orphans(fd, &unreferenced);
  for (std::int32_t id : {2, 3, 5}) second.kept(fd, id);
  freed = second.erase();
  EXPECT_EQ(freed[fd], (std::set<std::int32_t>{4, 6}));
  EXPECT_EQ(unreferenced, (std::set<std::int32_t>{7}));
  EXPECT_EQ(present(), 4u);  // 2, 3, 5, 7
  ::close(fd);
}

TEST(SdkEviction, PreviousTotalsForgetWhatIsNoLongerRead) {
  sdk::PreviousTotals<std::uint64_t> prev;
  prev.at("a") = 5;
  prev.at("b") = 7;
  prev.end_read();
  EXPECT_EQ(prev.size(), 2u);
  EXPECT_EQ(prev.at("a"), 5u);  // read again; b is not
  prev.end_read();
  EXPECT_EQ(prev.size(), 1u);
  prev.erase("a");
  EXPECT_EQ(prev.at("a"), 0u) << "an evicted key's bytes start again from zero";
}

namespace thinning_test {

struct Plain : loupe::sdk::Profiler {
  void setup(const loupe::sdk::SetupArgs&) override {}
};
struct Thinnable : loupe::sdk::Profiler {
  void setup(const loupe::sdk::SetupArgs&) override {}
  void set_rate(const loupe::sdk::RateArgs& a) {
    if (a.divisor > 64) throw loupe::sdk::Error(LOUPE_ERR_UNSUPPORTED, "not past 64 here");
    divisor = a.divisor;
  }
  std::uint32_t divisor = 1;
};

}  // namespace thinning_test

// The hook is exported only by a profiler that declares set_rate, so the host can tell
// which ones a budget can thin; its status and reason cross the C boundary.
TEST(SdkThinning, OnlyAProfilerThatDeclaresSetRateExportsTheHook) {
  using namespace thinning_test;
  constexpr loupe_config_key none[] = {{"x", LOUPE_CFG_BOOL, 0, "false", "x"}};
  const auto plain = loupe::sdk::detail::make_descriptor<Plain>("p", "1", "p", none);
  const auto thin = loupe::sdk::detail::make_descriptor<Thinnable>("t", "1", "t", none);
  EXPECT_EQ(plain.set_rate, nullptr);
  ASSERT_NE(thin.set_rate, nullptr);
  EXPECT_EQ(thin.size, sizeof(loupe_plugin_descriptor));
  Thinnable t;
  auto* self = reinterpret_cast<loupe_plugin*>(static_cast<loupe::sdk::PluginBase*>(&t));
  loupe_rate_args a{sizeof(a), 8};
  EXPECT_EQ(thin.set_rate(self, &a), LOUPE_OK);
  EXPECT_EQ(t.divisor, 8u);
  a.divisor = 0;  // read as 1: every event
  EXPECT_EQ(thin.set_rate(self, &a), LOUPE_OK);
  EXPECT_EQ(t.divisor, 1u);
  a.divisor = 128;
  EXPECT_EQ(thin.set_rate(self, &a), LOUPE_ERR_UNSUPPORTED);
  EXPECT_STREQ(thin.last_error(self), "not past 64 here");
}

// The divisor lands in the map the BPF side reads (a real array map: root only), and a
// row says what was skipped once anything was thinned.
TEST(SdkThinning, TheDivisorIsWrittenWhereTheProgramReadsIt) {
  loupe::sdk::Thinning t;
  EXPECT_THROW(t.set(4), loupe::sdk::Error) << "no map bound: the mode cannot be thinned";
  const int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "loupe_thin", 4, 4, 1, nullptr);
  if (fd < 0)
    GTEST_SKIP() << "cannot create a BPF map here (root needed): " << std::strerror(errno);
  t.bind(fd);
  EXPECT_EQ(t.highest(), 1u);
  t.set(16);
  t.set(4);
  std::uint32_t key = 0, v = 0;
  ASSERT_EQ(bpf_map_lookup_elem(fd, &key, &v), 0);
  EXPECT_EQ(v, 4u);
  EXPECT_EQ(t.divisor(), 4u);
  EXPECT_EQ(t.highest(), 16u);
  const loupe::sdk::HealthRow row = t.row("p/thinned", 42);
  EXPECT_STREQ(row.component, "p/thinned");
  EXPECT_EQ(row.value, 42u);
  EXPECT_NE(std::string(row.message).find("1 in 16"), std::string::npos) << row.message;
  ::close(fd);
}

namespace {

// A host whose symbolizer names nothing until told to, and counts its calls.
struct NamingHost {
  int calls = 0;
  const char* name = nullptr;  // set: every frame has it
  static int symbolize_stack(loupe_host* h, std::uint32_t, std::uint32_t kind,
                             const std::uint64_t* addrs, std::uint32_t n, loupe_frame* out,
                             std::uint32_t max_out, std::uint32_t* n_out) {
    auto* self = reinterpret_cast<NamingHost*>(h);
    ++self->calls;
    *n_out = std::min(n, max_out);
    for (std::uint32_t i = 0; i < *n_out; ++i)
      out[i] = {addrs[i], self->name,
                nullptr,  0,
                kind,     self->name ? LOUPE_RESOLVED_SYMTAB : LOUPE_UNRESOLVED_NO_MODULE};
    return LOUPE_OK;
  }
};

}  // namespace

// A stack none of whose frames has a name (JIT code no map names yet) is named again, but
// on a schedule that backs off to every 8 s, not at every warm-up and report: two JVMs'
// unnamed stacks cost the cpusample warmer 1,600 syscalls a second. The final report
// names them all again.
TEST(SdkStackMapFrames, UnnamedStacksAreNamedAgainLessAndLessOften) {
  using Clock = sdk::RenameSchedule::Clock;
  // A hash map of the stack map's layout (a stack map cannot be written from user space).
  const int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "loupe_stacks", 4, 4 * 8, 4, nullptr);
  if (fd < 0)
    GTEST_SKIP() << "cannot create a BPF map here (root needed): " << std::strerror(errno);
  const std::int32_t id = 1;
  const std::uint64_t ips[4] = {0x1000, 0x2000, 0, 0};
  ASSERT_EQ(bpf_map_update_elem(fd, &id, ips, BPF_ANY), 0);
  NamingHost naming;
  loupe_host_services svc{};
  svc.size = sizeof(svc);
  svc.host = reinterpret_cast<loupe_host*>(&naming);
  svc.symbolize_stack = &NamingHost::symbolize_stack;
  sdk::StackMapFrames frames(sdk::Host(&svc), fd, 4);
  ASSERT_EQ(frames.max_depth(), 4u);

  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(frames.user(7, id, t0).size(), 2u);
  EXPECT_EQ(naming.calls, 1);
  EXPECT_EQ(frames.unnamed(), 1u);
  // Asked for 4 times a second (the warmer's pace) for a minute: named again at 0.25,
  // 0.75, 1.75, 3.75, 7.75 s, then every 8 s: 11 times, not 240.
  for (int ms = 250; ms <= 60'000; ms += 250)
    frames.user(7, id, t0 + std::chrono::milliseconds(ms));
  EXPECT_EQ(naming.calls, 1 + 11);
  // The last report names it again at once, and a name found keeps it named.
  naming.name = "jitted";
  frames.rename_unnamed_now();
  const auto& named = frames.user(7, id, t0 + std::chrono::milliseconds(60'001));
  EXPECT_EQ(naming.calls, 13);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_STREQ(named[0].symbol, "jitted");
  EXPECT_EQ(frames.unnamed(), 0u);
  frames.user(7, id, t0 + std::chrono::seconds(120));
  EXPECT_EQ(naming.calls, 13);
  ::close(fd);
}
