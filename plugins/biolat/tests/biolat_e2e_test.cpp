// SPDX-License-Identifier: Apache-2.0
//
// End to end through the CLI: `loupe run PROFILE -- biolat_workload PATH N SIZE` with the
// jsonl sink, then the records are checked against what the workload did: N O_DIRECT
// writes and N O_DIRECT reads of SIZE bytes, attributed to the workload's pid.
//
// Why the counts are exact (no splits, and merges counted):
// - each pwrite/pread waits for its I/O, so two requests of the workload are never in
//   the queue together and cannot merge with each other; one may still join another
//   process's neighbouring request queued on a busy disk (seen as "23 of 24" beside three
//   builds), and is then counted as merged, not completed;
// - SIZE = 64 KiB, aligned, is below max_sectors_kb and max_segments of virtio and loop
//   queues, so no bio is split;
// - the file is written and fsynced by the test before the run, so the workload only
//   overwrites allocated blocks: no allocation, no journal I/O from its context (the
//   mtime update goes to jbd2's commit, another pid);
// - the workload binary and libc are in the page cache (just built / in use), so exec
//   reads nothing from disk; were it not, extra *reads* of other sizes would appear, and
//   the size histogram assertion would say so.
// Root only; skipped when the loupe binary was not built or the filesystem of /tmp has
// no O_DIRECT (tmpfs).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kWorkload = BIOLAT_WORKLOAD;
constexpr int kN = 24;
constexpr std::uint64_t kSize = 64 * 1024;

using loupe::test::RunResult;

std::string sh(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  if (rc) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class BiolatE2E : public loupe::test::CliRun {
 protected:
  void SetUp() override {
    CliRun::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    data_ = dir_ + "/data";
    prepare(data_, kN * kSize);
    int fd = open(data_.c_str(), O_RDWR | O_DIRECT);
    if (fd < 0)
      GTEST_SKIP() << "no O_DIRECT on the filesystem of /tmp (tmpfs?): " << strerror(errno);
    close(fd);
  }

  // Written and fsynced here, so the workload's O_DIRECT writes are plain overwrites.
  static void prepare(const std::string& path, std::uint64_t bytes) {
    std::vector<char> buf(kSize, 'x');
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    for (std::uint64_t off = 0; off < bytes; off += kSize)
      ASSERT_EQ(write(fd, buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
    ASSERT_EQ(fsync(fd), 0);
    close(fd);
  }

  // `under_shell`: the workload runs as a child of `sh -c '...; true'` (the session's
  // process tree), with `extra` on the loupe command line (--no-follow).
  RunResult run(const std::string& plugin_body, const std::string& target, int n = kN,
                bool under_shell = false, const std::string& extra = "") {
    // Run the workload once untraced first: its own pages and its libraries' are then in
    // the page cache, so the traced run's only I/O is its data (a cold exec pages in a few
    // 8-16 KiB reads in the workload's own context, which biolat rightly attributes to it).
    const std::string args = target + " " + std::to_string(n) + " " + std::to_string(kSize);
    int warm_rc = 0;
    sh(std::string(kWorkload) + " " + args, &warm_rc);
    const std::string body = "[[plugins]]\nname = \"biolat\"\n" + plugin_body;
    if (under_shell)
      return CliRun::run(body, {"sh", "-c", "'" + std::string(kWorkload) + " " + args + "; true'"},
                         extra);
    return CliRun::run(body, {kWorkload, args});
  }

  // A scsi_debug disk that takes one command at a time, 1 ms each, behind mq-deadline (so
  // waiting requests are inserted, and neighbours can merge): its name, or "" with the
  // reason in `why` (the host kernel of this VM has no modules). Unloaded at TearDown.
  std::string scsi_debug_disk(std::string* why) {
    int rc = 0;
    if (fs::exists("/sys/module/scsi_debug")) {
      *why = "scsi_debug is already loaded here, with parameters this test did not set";
      return "";
    }
    std::string out = sh("modprobe scsi_debug max_queue=1 ndelay=1000000 dev_size_mb=8", &rc);
    if (rc != 0) {
      *why = "no scsi_debug module on this kernel: " + out;
      return "";
    }
    scsi_debug_loaded_ = true;
    // The disk needs sd_mod, which nothing loads on a uevent where no udev runs.
    sh("modprobe sd_mod");
    auto disk = [] {
      std::string n = sh("grep -l scsi_debug /sys/block/*/device/model 2>/dev/null | head -n1");
      while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
      return n.empty() ? n : fs::path(n).parent_path().parent_path().filename().string();
    };
    std::string name = disk();
    for (int i = 0; i < 50 && (name.empty() || !fs::exists("/dev/" + name)); ++i) {
      usleep(100000);
      name = disk();
    }
    if (name.empty() || !fs::exists("/dev/" + name)) {
      ADD_FAILURE() << "no scsi_debug disk appeared";
      *why = "no disk";
      return "";
    }
    const std::string queue = "/sys/block/" + name + "/queue/";
    if (sh("echo mq-deadline > " + queue + "scheduler", &rc), rc != 0) {
      ADD_FAILURE() << "no mq-deadline";
      *why = "no mq-deadline";
      return "";
    }
    sh("echo 64 > " + queue + "nr_requests");
    return name;
  }

  void TearDown() override {
    if (scsi_debug_loaded_) sh("modprobe -r scsi_debug");
    CliRun::TearDown();
  }

  bool scsi_debug_loaded_ = false;
  std::string data_;
};

std::vector<const json*> select(const RunResult& r, const std::string& kind,
                                const std::string& name, const json& labels) {
  std::vector<const json*> out;
  for (const auto& rec : r.records) {
    if (rec.value("kind", "") != kind || rec.value("name", "") != name) continue;
    if (kind != "event" && !rec.value("is_final", false)) continue;
    bool ok = true;
    for (auto it = labels.begin(); it != labels.end(); ++it)
      ok = ok && rec["labels"].value(it.key(), "") == it.value().get<std::string>();
    if (ok) out.push_back(&rec);
  }
  return out;
}

double metric_sum(const RunResult& r, const std::string& name, const json& labels) {
  double v = 0;
  for (const json* m : select(r, "metric", name, labels))
    v += (*m)["metric"]["value"].get<double>();
  return v;
}

// The plugin's own accounting of a run: when a count is off, these say where the request
// went (untracked at issue, completed unmatched, requeued, filtered out).
std::string accounting(const RunResult& r) {
  std::string out = "biolat accounting:";
  for (const auto& rec : r.records) {
    if (!rec.value("is_final", false)) continue;
    const std::string name = rec.value("name", "");
    for (const char* n :
         {"completed", "issued_without_insert", "filtered_out", "in_flight",
          "unmatched_completions", "requeued", "partial_completions", "map_full", "merged_total"})
      if (name == n) {
        const json& v = rec.contains("metric") ? rec["metric"] : rec["health"];
        out += " " + name + "=" + v["value"].dump();
      }
    if (name == "request_in_flight") out += "\n  in flight at the stop: " + rec["event"].dump();
  }
  return out;
}

// A health row's value over the run.
double health_sum(const RunResult& r, const std::string& name) {
  double n = 0;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("name", "") == name &&
        rec.value("is_final", false))
      n += rec["health"]["value"].get<double>();
  return n;
}

// Events the kernel skipped because a BPF program was already running on that CPU (a
// classic tracepoint shares that guard with every tracing program), as the session's
// health counts them per program.
double recursion_misses(const RunResult& r) {
  return health_sum(r, "probe_recursion_misses");
}

// Every expectation of one run of kN writes + kN reads of kSize by the workload.
void expect_workload(const RunResult& r, const std::string& device, const std::string& mech) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SCOPED_TRACE(accounting(r));
  // A request whose insert, issue or completion the kernel skipped (counted) may be
  // missing from the counts, as often as counted and no more.
  const double missed = recursion_misses(r);
  if (missed > 0) {
    std::printf("  [%s] events the kernel skipped (probe_recursion_misses): %.0f\n", mech.c_str(),
                missed);
    double requests = 0, bytes = 0;
    for (std::string op : {"write", "read"}) {
      json dev = {{"device", device}, {"op", op}};
      requests += metric_sum(r, "requests", dev) + metric_sum(r, "merged", dev);
      bytes += metric_sum(r, "bytes", dev) + metric_sum(r, "merged_bytes", dev);
    }
    EXPECT_LE(requests, 2 * kN);
    EXPECT_GE(requests, 2 * kN - missed);
    EXPECT_EQ(bytes, requests * kSize);
    return;
  }
  for (std::string op : {"write", "read"}) {
    SCOPED_TRACE(op);
    json who = {{"device", device}, {"op", op}, {"comm", "biolat_workload"}, {"mechanism", mech}};
    auto procs = select(r, "metric", "process_requests", who);
    ASSERT_EQ(procs.size(), 1u) << "one pid, one comm";
    // A request that joined one already queued (a busy disk, another process's neighbour
    // block) has no completion of its own: its submission is counted as merged.
    const double merged = metric_sum(r, "process_merged", who);
    if (merged > 0)
      std::printf("  [%s] %s: %.0f of the workload's requests merged into queued ones\n",
                  mech.c_str(), op.c_str(), merged);
    // Where every request is an event too (outlier_ns = 1), one of another size is the
    // workload's own too, not its data: a page of its binary or a metadata block read back
    // after the warm-up run's pages were reclaimed (seen beside two parallel test builds:
    // one 4 KiB read). Each is named by its event; without events there is none to allow.
    double extra = 0, extra_bytes = 0;
    for (const json* e : select(r, "event", "slow_request", {{"device", device}, {"op", op}})) {
      const auto& f = (*e)["event"]["fields"];
      if (f["comm"] != "biolat_workload" || f["bytes"].get<std::uint64_t>() == kSize) continue;
      std::printf("  [%s] %s: a request of the workload's not of its data: %s\n", mech.c_str(),
                  op.c_str(), f.dump().c_str());
      extra += 1;
      extra_bytes += f["bytes"].get<double>();
    }
    const double own = kN - merged + extra;
    EXPECT_EQ(metric_sum(r, "process_requests", who), own);
    EXPECT_EQ(metric_sum(r, "process_bytes", who) + metric_sum(r, "process_merged_bytes", who),
              kN * kSize + extra_bytes);
    EXPECT_EQ(metric_sum(r, "process_errors", who), 0);

    // Device totals (the pid filter keeps only the workload's requests).
    json dev = {{"device", device}, {"op", op}};
    EXPECT_EQ(metric_sum(r, "requests", dev), own);
    EXPECT_EQ(metric_sum(r, "merged", dev), merged);
    // Offsets ascend by SIZE: all but the first are judged; on a contiguous file all are
    // sequential, a fragmented one may show a jump or two.
    EXPECT_EQ(metric_sum(r, "sequential", dev) + metric_sum(r, "random", dev), own - 1);
    EXPECT_GE(metric_sum(r, "sequential", dev), own - 3 - merged - 2 * extra);
    auto sizes = select(r, "histogram", "request_size", dev);
    ASSERT_FALSE(sizes.empty());
    std::uint64_t sized = 0;
    for (const json* h : sizes)
      for (const auto& b : (*h)["histogram"]["buckets"]) {
        // kSize, a power of two, is the inclusive top of its bucket (kSize/2, kSize].
        if (merged == 0 && extra == 0) {
          EXPECT_EQ(b["upper"].get<std::uint64_t>(), kSize + 1) << h->dump();
        }
        sized += b["count"].get<std::uint64_t>();
      }
    EXPECT_EQ(sized, static_cast<std::uint64_t>(own));
    std::uint64_t timed = 0;
    for (const json* h : select(r, "histogram", "total_latency", dev)) {
      timed += (*h)["histogram"]["count"].get<std::uint64_t>();
      EXPECT_GT((*h)["histogram"]["min"].get<std::uint64_t>(), 0u);
    }
    EXPECT_EQ(timed, static_cast<std::uint64_t>(own));
    EXPECT_EQ(select(r, "histogram", "service_latency", dev).size(), sizes.size());
  }
}

}  // namespace

class BiolatMechanisms : public BiolatE2E, public ::testing::WithParamInterface<const char*> {};

TEST_P(BiolatMechanisms, FileIoAttributedToPidWithExactCountsAndBytes) {
  std::string mech = GetParam();
  // outlier_ns = 1: every request becomes a slow_request event too.
  auto r = run("mechanism = \"" + mech + "\"\noutlier_ns = 1\n", data_);
  std::string device;
  for (const json* m : select(r, "metric", "process_requests", {{"comm", "biolat_workload"}}))
    device = (*m)["labels"]["device"];
  ASSERT_FALSE(device.empty()) << r.output;
  // The requests are on the disk that backs /tmp (its parent when /tmp is a partition).
  struct stat st {};
  ASSERT_EQ(stat(data_.c_str(), &st), 0);
  fs::path sys =
      "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  if (fs::exists(sys)) {
    fs::path real = fs::canonical(sys);
    EXPECT_EQ(device, (fs::exists(sys / "partition") ? real.parent_path() : real).filename());
  }
  expect_workload(r, device, mech);

  // Events: one per request, carrying what was captured at insert/issue.
  auto events = select(r, "event", "slow_request", {{"device", device}});
  std::string pid =
      select(r, "metric", "process_requests", {{"comm", "biolat_workload"}})[0]->at("labels").value(
          "pid", "");
  int writes = 0, reads = 0;
  for (const json* e : events) {
    const auto& f = (*e)["event"]["fields"];
    // A request of no data in the workload's name (seen once in 30 runs beside a writer
    // of 300 MB files: 0 bytes, neither read nor write) is a right event, not one of the
    // reads and writes counted here.
    if (f["comm"] != "biolat_workload" || (f["op"] != "write" && f["op"] != "read")) continue;
    EXPECT_EQ(std::to_string(f["pid"].get<int>()), pid);
    // Of another size: not its data (expect_workload counted it aside).
    if (f["bytes"].get<std::uint64_t>() != kSize) continue;
    EXPECT_GE(f["latency_ns"].get<std::uint64_t>(), f["service_ns"].get<std::uint64_t>());
    writes += f["op"] == "write";
    reads += f["op"] == "read";
  }
  // As the counts: short by a request only as often as the kernel counted a skipped
  // program run (a classic tracepoint shares its guard with every other tracer's: a
  // bpftrace script on the block tracepoints beside this test made it skip completions).
  // Merged requests complete inside another: no event of their own.
  const int missed = static_cast<int>(recursion_misses(r));
  const int merged = static_cast<int>(metric_sum(r, "process_merged", {{"device", device}}));
  EXPECT_LE(writes, kN);
  EXPECT_LE(reads, kN);
  EXPECT_GE(writes + reads, 2 * kN - missed - merged);
}

INSTANTIATE_TEST_SUITE_P(AllHooks, BiolatMechanisms,
                         ::testing::Values("tp_btf", "raw_tp", "tracepoint"));

TEST_F(BiolatE2E, WorkloadForkedByAShellIsTracedExactlyAndNotWithNoFollow) {
  // The session's target is the shell; the I/O is its child's. Followed, the counts are
  // the same exact ones as for a direct target; --no-follow leaves the shell alone.
  auto r = run("", data_, kN, /*under_shell=*/true);
  auto procs = select(r, "metric", "process_requests", {{"comm", "biolat_workload"}});
  ASSERT_FALSE(procs.empty()) << r.output;
  const json& labels = procs[0]->at("labels");
  expect_workload(r, labels.value("device", ""), labels.value("mechanism", ""));

  auto alone = run("", data_, kN, /*under_shell=*/true, "--no-follow");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_TRUE(select(alone, "metric", "process_requests", {{"comm", "biolat_workload"}}).empty());
}

TEST_F(BiolatE2E, LoopDeviceIoAttributedToPid) {
  if (!fs::exists("/dev/loop-control")) GTEST_SKIP() << "no /dev/loop-control (loop module absent)";
  std::string backing = dir_ + "/loop.img";
  prepare(backing, kN * kSize);
  int rc = 0;
  std::string loop = sh("losetup -f --show " + backing, &rc);
  if (rc != 0) GTEST_SKIP() << "cannot create a loop device here: " << loop;
  while (!loop.empty() && (loop.back() == '\n' || loop.back() == ' ')) loop.pop_back();
  std::string name = fs::path(loop).filename();
  // Only the loop device: the loop worker's I/O to the backing file lands on the disk.
  auto r = run("device = \"" + name + "\"\n", loop);
  sh("losetup -d " + loop);
  expect_workload(r, name, "tp_btf");
}

// Overflow contract (issue 27): with room for one (device, op, sync) aggregate and one
// (device, op) sequential-test entry, the workload's writes take them and its reads do not
// fit. Every request is either in the device histograms or counted in stats_full (WARN,
// naming max_device_ops): kept + lost = the workload's own 2N. The reads' process rows and
// events still come, so the loss is the device totals' alone.
TEST_F(BiolatE2E, TinyAggregateMapsCountEveryRequestTheyCannotKeep) {
  auto r = run("max_device_ops = 1\nprocess_limit = 16\noutlier_ns = 1\n", data_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SCOPED_TRACE(accounting(r));
  std::uint64_t kept = 0;
  for (const json* h : select(r, "histogram", "total_latency", json::object()))
    kept += (*h)["histogram"]["count"].get<std::uint64_t>();
  const std::uint64_t lost = r.expect_loss("stats_full", "max_device_ops");
  // A request whose insert, issue or completion the kernel skipped (probe_recursion_misses,
  // counted) may be in neither, as often as counted and no more.
  const auto missed = static_cast<std::uint64_t>(recursion_misses(r));
  std::printf("  requests: %d produced, %llu kept, %llu counted lost, %llu skipped\n", 2 * kN,
              static_cast<unsigned long long>(kept), static_cast<unsigned long long>(lost),
              static_cast<unsigned long long>(missed));
  EXPECT_LE(kept + lost, 2u * kN) << "kept " << kept << ", lost " << lost;
  EXPECT_GE(kept + lost + missed, 2u * kN) << "kept " << kept << ", lost " << lost;
  EXPECT_GE(lost + missed, static_cast<std::uint64_t>(kN)) << "one of the two ops cannot fit";
  // The sequential test had one (device, op) entry: the other op's N requests went unjudged.
  EXPECT_GE(r.expect_loss("pattern_full", "max_device_ops") + missed,
            static_cast<std::uint64_t>(kN));
  EXPECT_GE(metric_sum(r, "process_requests", {{"comm", "biolat_workload"}}) + missed, 2 * kN);
  std::uint64_t events = 0;
  for (const json* e : select(r, "event", "slow_request", json::object()))
    events += (*e)["event"]["fields"]["comm"] == "biolat_workload";
  EXPECT_GE(events + missed, 2u * kN);
}

// Rule queue_share (README): a device that takes one request at a time (scsi_debug with
// max_queue=1, 1 ms per command, behind mq-deadline so waiting requests are inserted)
// under 8 workloads at once: their requests wait in the queue most of their time, and
// the finding says so with the records' own sums. One workload alone never waits: no
// finding. Where the kernel has no scsi_debug module (this VM's host kernel has no
// modules), the test says so and skips.
TEST_F(BiolatE2E, QueueBoundDeviceIsAFinding) {
  std::string why;
  const std::string name = scsi_debug_disk(&why);
  if (name.empty()) GTEST_SKIP() << why;
  const std::string dev = "/dev/" + name;
  const std::string one = std::string(kWorkload) + " " + dev + " 24 " + std::to_string(kSize);

  auto queued_share = [&](const RunResult& r, std::vector<const json*>* found) {
    double queue_ns = 0, total_ns = 0;
    for (const json* h : select(r, "histogram", "queue_latency", {{"device", name}}))
      queue_ns += (*h)["histogram"]["sum"].get<double>();
    for (const json* h : select(r, "histogram", "total_latency", {{"device", name}}))
      total_ns += (*h)["histogram"]["sum"].get<double>();
    for (const json* f : select(r, "finding", "queue_share", {{"device", name}}))
      found->push_back(f);
    return std::make_pair(queue_ns, total_ns);
  };

  std::string eight;
  for (int i = 0; i < 8; ++i) eight += one + " & ";
  RunResult r = CliRun::run(
      "[[plugins]]\nname = \"biolat\"\ndevice = \"" + name + "\"\n[[sinks]]\nname = \"findings\"\n",
      {"sh", "-c", "'" + eight + "wait'"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<const json*> found;
  const auto [queue_ns, total_ns] = queued_share(r, &found);
  ASSERT_GT(total_ns, 0) << r.output;
  std::printf("  8 workloads on %s: queue %.1f ms of %.1f ms (%.0f %%)\n", name.c_str(),
              queue_ns / 1e6, total_ns / 1e6, 100 * queue_ns / total_ns);
  ASSERT_EQ(found.size(), 1u) << r.output;
  const json& f = (*found[0])["finding"];
  std::printf("  %s\n", f["statement"].get<std::string>().c_str());
  EXPECT_EQ(f["evidence"]["queue_ns"].get<double>(), queue_ns);
  EXPECT_EQ(f["evidence"]["total_ns"].get<double>(), total_ns);
  EXPECT_NEAR(f["evidence"]["share"].get<double>(), queue_ns / total_ns, 1e-9);
  // 8 requests offered, 1 taken: most of each request's time is the wait for the device.
  EXPECT_GE(f["evidence"]["share"].get<double>(), 0.5);
  EXPECT_NE(f["statement"].get<std::string>().find(name + ": queue time is "), std::string::npos);
  std::ifstream in(dir_ + "/out/findings.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("queue share: " + name + ": queue time is "), std::string::npos) << text;

  RunResult alone =
      CliRun::run("[[plugins]]\nname = \"biolat\"\ndevice = \"" + name + "\"\n", {one});
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  std::vector<const json*> none;
  const auto [q1, t1] = queued_share(alone, &none);
  std::printf("  1 workload: queue %.1f ms of %.1f ms (%.0f %%)\n", q1 / 1e6, t1 / 1e6,
              t1 > 0 ? 100 * q1 / t1 : 0.0);
  ASSERT_GT(t1, 0) << alone.output;
  // One request at a time waits far less than eight do; on a quiet machine next to
  // nothing (no finding), but the insert-to-issue time is the CPU's too: in a loaded 6.1
  // guest the dispatch lagged 0.4 ms a request (21 %). The rule is held to its own
  // evidence: a finding exactly when the share reaches its 20 %.
  EXPECT_LT(q1 / t1, queue_ns / total_ns);
  EXPECT_EQ(!none.empty(), q1 / t1 >= 0.2) << (none.empty() ? "" : none[0]->dump());
}

// Merges (README "Merges"): four processes write, then read, neighbouring 4 KiB blocks of a
// disk that takes one command at a time, released together block by block, so the
// block layer merges their I/O across processes. Each process's submissions are its
// requests plus its merged ones, exactly, whoever's request carried them; and the disk's
// own counters (/sys/block/NAME/stat, what iostat reads) agree with loupe's requests and
// merges per op.
TEST_F(BiolatE2E, MergedIoIsCountedForItsOwnerAsTheDiskCountsIt) {
  std::string why;
  const std::string name = scsi_debug_disk(&why);
  if (name.empty()) GTEST_SKIP() << why;
  constexpr int kProcs = 4, kRounds = 64;
  constexpr std::uint64_t kBlock = 4096;
  // Settled: the disk's probe (its partition table) may still be reading when it appears.
  auto disk_stat = [&] {
    std::vector<std::uint64_t> last;
    for (int i = 0; i < 20; ++i) {
      std::ifstream in("/sys/block/" + name + "/stat");
      std::vector<std::uint64_t> v;
      for (std::uint64_t x; in >> x;) v.push_back(x);
      if (v == last) break;
      last = v;
      usleep(100000);
    }
    return last;
  };
  for (const char* mech : {"tp_btf", "raw_tp", "tracepoint"}) {
    SCOPED_TRACE(mech);
    std::printf("  [%s]\n", mech);
    const auto before = disk_stat();
    RunResult r =
        CliRun::run("[[plugins]]\nname = \"biolat\"\nmechanism = \"" + std::string(mech) +
                        "\"\ndevice = \"" + name + "\"\n",
                    {std::string(BIOLAT_MERGE_WORKLOAD), "/dev/" + name, std::to_string(kProcs),
                     std::to_string(kRounds), std::to_string(kBlock)});
    const auto after = disk_stat();
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_GE(before.size(), 8u);
    ASSERT_GE(after.size(), 8u);
    SCOPED_TRACE(accounting(r));
    // A program the kernel skipped because another ran on that CPU is counted; short by as
    // many, and no more. The classic flavour (the fallback for kernels without raw_tp)
    // keys a request by its sector, which merges move, and before 6.7 its skipped runs
    // are not counted: there a request or two of 512 went missing in guests under load
    // (README), so it is held only to never more than the disk, and its shortfall printed.
    const bool classic = std::string(mech) == "tracepoint";
    const double missed = classic ? 2.0 * kProcs * kRounds : recursion_misses(r);
    if (!classic && missed > 0) std::printf("  runs the kernel skipped (counted): %.0f\n", missed);
    // The stat file: reads completed, reads merged, sectors, ms; then the same for writes.
    struct Op {
      const char* name;
      int done, merged;
    } ops[] = {{"read", 0, 1}, {"write", 4, 5}};
    double merged_all = 0;
    for (const auto& op : ops) {
      SCOPED_TRACE(op.name);
      const json dev = {{"device", name}, {"op", op.name}};
      const double requests = metric_sum(r, "requests", dev);
      const double merged = metric_sum(r, "merged", dev);
      const auto disk_done = static_cast<double>(after[op.done] - before[op.done]);
      const auto disk_merged = static_cast<double>(after[op.merged] - before[op.merged]);
      std::printf("  %s: loupe %.0f requests and %.0f merged; the disk %.0f and %.0f\n", op.name,
                  requests, merged, disk_done, disk_merged);
      EXPECT_LE(requests, disk_done);
      EXPECT_LE(merged, disk_merged);
      EXPECT_GE(requests + merged + missed, disk_done + disk_merged);
      EXPECT_EQ(disk_done + disk_merged, kProcs * kRounds) << "the disk's own count";
      if (classic)
        std::printf("  classic flavour short by %.0f (in flight %.0f, unmatched %.0f)\n",
                    disk_done + disk_merged - requests - merged,
                    metric_sum(r, "in_flight", json::object()),
                    health_sum(r, "unmatched_completions"));
      if (missed == 0) {
        EXPECT_EQ(requests, disk_done);
        EXPECT_EQ(merged, disk_merged);
        EXPECT_EQ(metric_sum(r, "bytes", dev), kProcs * kRounds * kBlock);
        EXPECT_EQ(metric_sum(r, "merged_bytes", dev), merged * kBlock);
      }
      const auto procs = select(r, "metric", "process_requests",
                                {{"device", name}, {"op", op.name}, {"comm", "biolat_merge_wo"}});
      EXPECT_EQ(procs.size(), static_cast<std::size_t>(kProcs));
      for (const json* p : procs) {
        const json who = {{"device", name}, {"op", op.name}, {"pid", (*p)["labels"]["pid"]}};
        const double own =
            metric_sum(r, "process_requests", who) + metric_sum(r, "process_merged", who);
        EXPECT_LE(own, kRounds) << "pid " << (*p)["labels"]["pid"];
        EXPECT_GE(own + missed, kRounds) << "pid " << (*p)["labels"]["pid"];
      }
      merged_all += merged;
    }
    // The premise: a disk one command deep, with neighbours queued behind it.
    EXPECT_GT(merged_all, 0) << "no merge happened, so this run proves nothing";
  }
}

TEST_F(BiolatE2E, MinLatencyFilterCountsInsteadOfRecording) {
  auto r = run("min_latency_ns = 60000000000\n", data_);  // 60 s: nothing is that slow
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(select(r, "metric", "requests", json::object()).empty());
  // Merged I/O has no latency of its own to hold against the minimum: counted as merged.
  EXPECT_GE(metric_sum(r, "below_min_latency", json::object()) +
                metric_sum(r, "merged_total", json::object()),
            2 * kN)
      << accounting(r);
}

TEST_F(BiolatE2E, OtherDeviceFilterSeesNothingOfTheWorkload) {
  // Any block device but the one under /tmp; a loop device minor that is not in use works.
  auto r = run("device = \"7:250\"\n", data_, 4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(select(r, "metric", "process_requests", json::object()).empty()) << r.output;
}

TEST_F(BiolatE2E, BadInputIsRefusedWithTheReason) {
  auto r = run("device = \"nosuchdisk0\"\n", data_, 1);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no such block device"), std::string::npos) << r.output;
  r = run("mechanism = \"kprobe\"\n", data_, 1);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("\"kprobe\" is not allowed (expected \"auto\", \"tp_btf\", \"raw_tp\" or "
                          "\"tracepoint\")"),
            std::string::npos)
      << r.output;
}
