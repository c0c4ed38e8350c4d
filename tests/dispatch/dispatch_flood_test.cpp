// SPDX-License-Identifier: Apache-2.0
//
// Dispatch on the real kernel, through the CLI, with the test-only "flood" plugin: a
// getppid() loop makes its BPF program emit bursts into a small ring as fast as it can.
// Checked: produced = sampled out + lost in the kernel + received, and received = every
// counted outcome (for each queue policy); SIGINT ends a flooding session within the
// drain deadline with its report written; a recorded capture replays (without a kernel)
// into the same records.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <iterator>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string env(const char* n) {
  const char* v = std::getenv(n);
  return v ? v : "";
}

std::vector<Json> read_jsonl(const fs::path& p) {
  std::vector<Json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

// The final report, by name: health values of the flood ring and the plugin's counters.
std::map<std::string, double> final_values(const std::vector<Json>& recs) {
  std::map<std::string, double> v;
  for (const auto& r : recs) {
    if (!r["is_final"].get<bool>()) continue;
    std::string name = r["name"];
    if (r["kind"] == "health" && r["health"]["component"] == "flood/flood")
      v[name] = r["health"]["value"].get<double>();
    if (r["kind"] == "metric" && r["plugin"] == "flood")
      v[name] = r["metric"]["value"].get<double>();
    if (r["kind"] == "health" && name == "plugin_ring_loss" && r["health"]["component"] == "flood")
      v[name] = r["health"]["value"].get<double>();
  }
  return v;
}

class Child {
 public:
  explicit Child(std::vector<std::string> argv) {
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  void signal(int sig) { kill(pid_, sig); }
  // Exit status, or -1 when it did not end within `limit`.
  int wait_for(std::chrono::seconds limit) {
    auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

class DispatchFlood : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (loads BPF programs into the kernel)";
    loupe_ = env("LOUPE_BIN");
    ASSERT_TRUE(fs::exists(loupe_)) << "loupe CLI not built: " << loupe_;
    dir_ = fs::temp_directory_path() /
           ("loupe-dispatch-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }
  fs::path profile(const std::string& flood_keys, const std::string& name = "profile.toml") {
    fs::path p = dir_ / name;
    std::ofstream(p) << "[session]\ndrain_timeout = 2.0\n"
                     << "[[plugins]]\nname = \"flood\"\nlibrary = \"" << FLOOD_PLUGIN << "\"\n"
                     << flood_keys << "\n[[sinks]]\nname = \"jsonl\"\n";
    return p;
  }
  int run(std::vector<std::string> args, std::chrono::seconds limit = std::chrono::seconds(60)) {
    args.insert(args.begin(), loupe_);
    Child c(args);
    return c.wait_for(limit);
  }
  void expect_invariant(const std::map<std::string, double>& v) {
    ASSERT_TRUE(v.count("flood_attempts")) << "no final flood_attempts counter";
    ASSERT_TRUE(v.count("ring_received") && v.count("ring_lost_kernel"));
    double produced = v.at("flood_attempts");
    EXPECT_GT(produced, 0);
    EXPECT_EQ(produced,
              v.at("flood_sampled_out") + v.at("ring_lost_kernel") + v.at("ring_received"))
        << "produced = sampled out + lost in the kernel + received";
    EXPECT_EQ(v.at("ring_received"), v.at("ring_decoded") + v.at("ring_dropped_queue") +
                                         v.at("ring_coalesced") + v.at("ring_count_only") +
                                         v.at("ring_malformed") + v.at("ring_decode_errors"))
        << "received = delivered + each counted loss";
    EXPECT_EQ(v.at("ring_queued"), 0);
    ASSERT_TRUE(v.count("plugin_ring_loss"));
    EXPECT_EQ(v.at("plugin_ring_loss"), v.at("ring_lost_kernel") + v.at("ring_dropped_queue") +
                                            v.at("ring_coalesced") + v.at("ring_count_only") +
                                            v.at("ring_malformed") + v.at("ring_decode_errors"));
    EXPECT_EQ(v.at("flood_decoded"), v.at("ring_decoded"));
  }
  std::string loupe_;
  fs::path dir_;
};

class DispatchPolicy : public DispatchFlood, public ::testing::WithParamInterface<std::string> {};

TEST_P(DispatchPolicy, EveryProducedRecordIsDeliveredOrCounted) {
  // A 16 KiB ring, bursts of 32 and a decoder slow enough (20 us/record) that both the
  // kernel ring and the 65536-record queue overflow; every 997th record is malformed.
  auto p = profile(
      "ring_kb = 16\nburst = 32\nmalformed_every = 997\ndecode_spin_ns = 20000\npolicy = \"" +
      GetParam() + "\"\n");
  int rc = run({"run", p.string(), "-o", dir_.string(), "--", FLOOD_WORKLOAD, "150000"});
  ASSERT_EQ(rc, 0);
  auto recs = read_jsonl(dir_ / "records.jsonl");
  auto v = final_values(recs);
  expect_invariant(v);
  EXPECT_GT(v["ring_malformed"], 0);
  EXPECT_GT(v["ring_decoded"], 0);
  EXPECT_GT(v["ring_lost_kernel"] + v["ring_dropped_queue"] + v["ring_coalesced"] +
                v["ring_count_only"] + v["flood_sampled_out"],
            0)
      << "the flood should have overflowed something";
  // The queue overflowed, and the ring's policy is what handled it.
  const char* handled = GetParam() == "drop"       ? "ring_dropped_queue"
                        : GetParam() == "coalesce" ? "ring_coalesced"
                                                   : "ring_count_only";
  // Natively the decoder falls a queue behind and the policy acts; an emulated kernel's
  // producer can be too slow for that (the kernel ring overflows first). Whenever the
  // queue did fill, the policy must have acted.
  constexpr double kQueueRecords = 1 << 16;  // RingDispatcher::Options::queue_capacity
  EXPECT_TRUE(v[handled] > 0 || v["ring_queue_high_water"] < kQueueRecords)
      << handled << " = 0 although the queue reached " << v["ring_queue_high_water"];
  // A drop says why: the queue was full, or the drain at the end ran out of time.
  for (const auto& r : recs)
    if (r["is_final"].get<bool>() && r["name"] == "ring_dropped_queue" &&
        r["health"]["value"].get<double>() > 0) {
      const std::string why = r["health"].value("message", "");
      EXPECT_TRUE(why.find("with the queue full") != std::string::npos ||
                  why.find("drain_timeout") != std::string::npos)
          << r.dump();
    }
  if (GetParam() == "coalesce") {
    // The merged records keep their key: per-key counters add up to the coalesced total.
    double keyed = 0;
    for (const auto& r : recs)
      if (r["is_final"].get<bool>() && r["name"] == "ring_coalesced_records")
        keyed += r["metric"]["value"].get<double>();
    EXPECT_EQ(keyed, v["ring_coalesced"]);
  }
  if (v["flood_sampled_out"] > 0) {
    bool raised = false;
    for (const auto& r : recs)
      raised |=
          r["name"] == "ring_backpressure" && r["event"]["fields"]["change"] == "divisor_raised";
    EXPECT_TRUE(raised) << "records were sampled out, so a divisor change must have been reported";
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, DispatchPolicy,
                         ::testing::Values("drop", "coalesce", "count_only"));

TEST_F(DispatchFlood, SigintEndsAFloodWithinTheDeadline) {
  auto p = profile("ring_kb = 16\nburst = 64\ndecode_spin_ns = 5000\n");
  Child c({loupe_, "run", p.string(), "-o", dir_.string(), "-i", "0.4", "--", FLOOD_WORKLOAD, "0"});
  // Interrupt a flood that is under way: wait for the first interval report of the ring
  // (attaching takes seconds on an emulated kernel, milliseconds here), then a little more.
  const auto ready_by = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::ifstream in(dir_ / "records.jsonl");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("\"ring_received\"") != std::string::npos || Clock::now() > ready_by) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto t0 = Clock::now();
  c.signal(SIGINT);
  // drain_timeout is 2 s; everything else (detach, final collect, flush) is fast. 15 s
  // leaves room for a loaded machine while still catching a reader that never stops.
  int rc = c.wait_for(std::chrono::seconds(15));
  ASSERT_EQ(rc, 130) << "loupe did not end on SIGINT (rc -1 = still running after 15 s)";
  auto took = std::chrono::duration<double>(Clock::now() - t0).count();
  RecordProperty("sigint_to_exit_s", std::to_string(took));
  auto recs = read_jsonl(dir_ / "records.jsonl");
  expect_invariant(final_values(recs));
  // Interval reports carry the ring's health too, not only the final one.
  int interval_health = 0;
  for (const auto& r : recs)
    interval_health +=
        !r["is_final"].get<bool>() && r["name"] == "ring_received" && r["health"]["value"] > 0;
  EXPECT_GE(interval_health, 1);
}

TEST_F(DispatchFlood, ReplayOfACaptureReproducesTheRecords) {
  auto p = profile("ring_kb = 1024\nburst = 4\nemit_events = true\nmalformed_every = 501\n");
  fs::path cap = dir_ / "capture.loupecap";
  fs::path run_dir = dir_ / "run", replay_dir = dir_ / "replay";
  ASSERT_EQ(run({"run", p.string(), "-o", run_dir.string(), "--record", cap.string(), "--",
                 FLOOD_WORKLOAD, "2000"}),
            0);
  ASSERT_TRUE(fs::exists(cap));
  // No kernel side: the plugin registers its ring without loading BPF.
  ASSERT_EQ(run({"replay", cap.string(), p.string(), "-o", replay_dir.string()}), 0);
  auto a = read_jsonl(run_dir / "records.jsonl"), b = read_jsonl(replay_dir / "records.jsonl");
  using Ev = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;
  auto events = [](const std::vector<Json>& recs) {
    std::vector<Ev> out;
    for (const auto& r : recs)
      if (r["name"] == "flood_record") {
        const auto& f = r["event"]["fields"];
        out.emplace_back(f["seq"].get<std::uint64_t>(), f["key"].get<std::uint64_t>(),
                         f["tgid"].get<std::uint64_t>());
      }
    return out;
  };
  auto ea = events(a), eb = events(b);
  auto va = final_values(a), vb = final_values(b);
  ASSERT_GT(ea.size(), 0u);
  // The capture holds every record read from the ring, before the decode queue: a live run
  // that dropped some there (counted; seen on a loaded guest) replays them all, and
  // otherwise the same records in the same order.
  const auto dropped = static_cast<std::size_t>(va["ring_dropped_queue"]);
  EXPECT_EQ(eb.size(), ea.size() + dropped);
  std::size_t in_order = 0;  // the live run's records found, in order, among the replay's
  for (const auto& e : eb)
    if (in_order < ea.size() && e == ea[in_order]) ++in_order;
  EXPECT_EQ(in_order, ea.size());
  if (dropped == 0) EXPECT_EQ(ea, eb) << "the same records, in the same order";
  EXPECT_EQ(va["flood_decoded"] + va["ring_dropped_queue"], vb["flood_decoded"]);
  EXPECT_EQ(va["ring_received"], vb["ring_received"]);
  EXPECT_EQ(va["ring_malformed"], vb["ring_malformed"]);
  EXPECT_GT(vb["ring_malformed"], 0);
  EXPECT_EQ(vb["ring_dropped_queue"], 0);
}

TEST_F(DispatchFlood, ReplayRefusesACaptureThePluginsDoNotMatch) {
  fs::path cap = dir_ / "bad.loupecap";
  std::ofstream(cap) << "garbage";
  auto p = profile("");
  EXPECT_EQ(run({"replay", cap.string(), p.string(), "-o", dir_.string()}), 2);
}

}  // namespace
