// SPDX-License-Identifier: Apache-2.0
//
// biolat helpers without BPF: device names from a sysfs-like folder written here, the
// tracepoint prototype read from this kernel's BTF, histogram merge and interval deltas.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "bio_hist.hpp"
#include "device_names.hpp"
#include "loupe/sdk/histogram.hpp"
#include "rq_prototype.hpp"

namespace fs = std::filesystem;
using namespace loupe::biolat;

namespace {

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/biolat-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // Like /sys/class/block: links into the device tree, partitions under their disk.
    fs::create_directories(root_ / "devices/vdb/vdb1");
    std::ofstream(root_ / "devices/vdb/dev") << "254:16\n";
    std::ofstream(root_ / "devices/vdb/vdb1/dev") << "254:17\n";
    std::ofstream(root_ / "devices/vdb/vdb1/partition") << "1\n";
    fs::create_directories(root_ / "block");
    fs::create_directory_symlink(root_ / "devices/vdb", root_ / "block/vdb");
    fs::create_directory_symlink(root_ / "devices/vdb/vdb1", root_ / "block/vdb1");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

}  // namespace

TEST_F(FakeSysfs, NamesAndFilters) {
  DeviceNames d((root_ / "block").string());
  EXPECT_EQ(d.name(kernel_dev(254, 16)), "vdb");
  EXPECT_EQ(d.name(kernel_dev(8, 0)), "8:0");  // unknown: major:minor
  EXPECT_EQ(d.resolve("vdb"), kernel_dev(254, 16));
  EXPECT_EQ(d.resolve("/dev/vdb"), kernel_dev(254, 16));
  EXPECT_EQ(d.resolve("254:16"), kernel_dev(254, 16));
  EXPECT_EQ(d.resolve("7:3"), kernel_dev(7, 3));  // not there yet (a loop device to come)
  try {
    d.resolve("vdb1");
    FAIL() << "a partition must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("filter on vdb"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.resolve("sdz"), std::invalid_argument);
  EXPECT_THROW(d.resolve(""), std::invalid_argument);
  EXPECT_THROW(d.resolve("254:"), std::invalid_argument);
  EXPECT_THROW(d.resolve("a/b"), std::invalid_argument);
  EXPECT_EQ(dev_string(kernel_dev(254, 16)), "254:16");
}

TEST_F(FakeSysfs, PartitionsMapToTheirDisk) {
  const auto parts = DeviceNames((root_ / "block").string()).partition_disks();
  ASSERT_EQ(parts.size(), 1u);  // vdb is a disk, not a partition
  EXPECT_EQ(parts.at(kernel_dev(254, 17)), kernel_dev(254, 16));
}

TEST_F(FakeSysfs, LateDeviceFoundOnMiss) {
  DeviceNames d((root_ / "block").string());
  EXPECT_EQ(d.name(kernel_dev(7, 0)), "7:0");
  fs::create_directories(root_ / "devices/loop0");
  std::ofstream(root_ / "devices/loop0/dev") << "7:0\n";
  fs::create_directory_symlink(root_ / "devices/loop0", root_ / "block/loop0");
  EXPECT_EQ(d.name(kernel_dev(7, 0)), "loop0");
}

TEST(RqPrototype, ThisKernel) {
  std::string why;
  if (!fs::exists("/sys/kernel/btf/vmlinux")) GTEST_SKIP() << "no kernel BTF";
  // Since v5.11 the request is the only argument; complete always had it first.
  auto issue = rq_tracepoint_single_arg("block_rq_issue", &why);
  ASSERT_TRUE(issue.has_value()) << why;
  auto complete = rq_tracepoint_single_arg("block_rq_complete", &why);
  ASSERT_TRUE(complete.has_value()) << why;
  EXPECT_TRUE(*complete);
  // The bio merge tracepoints lost (q, rq) before their bio in the same release.
  auto bio = tracepoint_pointer_arg("block_bio_backmerge", "bio", &why);
  ASSERT_TRUE(bio.has_value()) << why;
  EXPECT_EQ(*bio == 0, *issue) << "bio argument " << *bio;
  EXPECT_FALSE(tracepoint_pointer_arg("block_rq_issue", "bio", &why).has_value());
  EXPECT_NE(why.find("no struct bio *"), std::string::npos) << why;
  EXPECT_FALSE(rq_tracepoint_single_arg("no_such_tracepoint_xyz", &why).has_value());
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
}

TEST(BioHist, ProcessRowsSumEveryCounter) {
  std::vector<bio_proc> cpus(2);
  cpus[0].count = 1;
  cpus[0].bytes = 4096;
  cpus[0].max_ns = 7;
  cpus[1].count = 2;
  cpus[1].max_ns = 5;
  cpus[1].merged = 4;
  cpus[1].merged_bytes = 16384;
  const bio_proc p = merge_per_cpu(std::span<const bio_proc>(cpus));
  EXPECT_EQ(p.count, 3u);
  EXPECT_EQ(p.bytes, 4096u);
  EXPECT_EQ(p.max_ns, 7u);
  EXPECT_EQ(p.merged, 4u);
  EXPECT_EQ(p.merged_bytes, 16384u);
}

TEST(BioHist, MergeAndIntervalDelta) {
  std::vector<bio_stats> cpus(2);
  cpus[0].total = {};
  cpus[0].total.count = 2;
  cpus[0].total.sum = 3000;
  cpus[0].total.min = 1000;
  cpus[0].total.max = 2000;
  cpus[0].total.slots[11] = 1;  // 1000 in (512, 1024]
  cpus[0].total.slots[12] = 1;  // 2000 in (1024, 2048]
  cpus[1].total.count = 1;
  cpus[1].total.sum = 100000;
  cpus[1].total.min = 100000;
  cpus[1].total.max = 100000;
  cpus[1].total.slots[18] = 1;  // 100000 in (65536, 131072]
  cpus[0].bytes = 4096;
  cpus[1].bytes = 8192;
  cpus[1].sequential = 1;
  cpus[0].merged = 2;  // every per-CPU counter is summed: merges once were not
  cpus[1].merged = 3;
  cpus[1].merged_bytes = 12288;
  bio_stats m = merge_per_cpu(std::span<const bio_stats>(cpus));
  EXPECT_EQ(m.merged, 5u);
  EXPECT_EQ(m.merged_bytes, 12288u);
  EXPECT_EQ(m.total.count, 3u);
  EXPECT_EQ(m.total.min, 1000u);
  EXPECT_EQ(m.total.max, 100000u);
  EXPECT_EQ(m.bytes, 12288u);
  EXPECT_EQ(m.sequential, 1u);
  EXPECT_EQ(m.queue.count, 0u);
  auto buckets = loupe::sdk::hist_buckets(m.total);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].lower, 513u);  // (512, 1024] as integers: [513, 1025)
  EXPECT_EQ(buckets[0].upper, 1025u);
  EXPECT_EQ(buckets[2].lower, 65537u);

  bio_stats before = m;
  m.total.count += 1;
  m.total.sum += 1500;
  m.total.slots[12] += 1;
  bio_stats d = interval_delta(m, before);
  EXPECT_EQ(d.total.count, 1u);
  EXPECT_EQ(d.total.sum, 1500u);
  EXPECT_EQ(d.total.min, 1025u);  // the interval's only bucket bounds min and max
  EXPECT_EQ(d.total.max, 2048u);
  EXPECT_EQ(d.bytes, 0u);
}
