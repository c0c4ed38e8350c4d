// SPDX-License-Identifier: Apache-2.0
//
// The session's own account of what it lost (session/health_report.hpp), on facts given to
// it: which rows a ring's counters make, with what severity and share of what whole, and
// what the final failures say. No kernel, no session.
#include "session/health_report.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace {

struct Row {
  std::string name, component, message, whole_unit;
  std::uint64_t value = 0, whole = 0;
  std::uint32_t severity = 0, effect = 0;
  bool is_final = false;
};

struct Metric {
  std::map<std::string, std::string> labels;
  double value = 0;
  bool is_final = false;
};

// Every record the report publishes, copied out (a record's pointers live for the call).
struct Published {
  std::vector<Row> rows;
  std::vector<Metric> metrics;

  loupe::HealthReport::Publish sink() {
    return [this](const loupe_record& r) {
      if (r.kind == LOUPE_RECORD_HEALTH) {
        Row row;
        row.name = r.name;
        row.component = r.health->component;
        row.message = r.health->message ? r.health->message : "";
        row.whole_unit = r.health->whole_unit ? r.health->whole_unit : "";
        row.value = r.health->value;
        row.whole = r.health->whole;
        row.severity = r.health->severity;
        row.effect = r.health->effect;
        row.is_final = r.is_final != 0;
        rows.push_back(row);
      } else if (r.kind == LOUPE_RECORD_METRIC) {
        Metric m;
        for (std::uint32_t i = 0; i < r.n_labels; ++i)
          m.labels[r.labels[i].key] = r.labels[i].value;
        m.value = r.metric->value;
        m.is_final = r.is_final != 0;
        metrics.push_back(m);
      }
    };
  }

  const Row* row(const std::string& name, const std::string& component) const {
    for (const Row& r : rows)
      if (r.name == name && r.component == component) return &r;
    return nullptr;
  }
};

loupe::RingStats ring(const char* plugin, const char* name) {
  loupe::RingStats st;
  st.plugin = plugin;
  st.ring = name;
  st.lost_kernel_known = true;
  return st;
}

}  // namespace

TEST(HealthReport, ALossIsAWarningWithItsShareOfWhatTheKernelProduced) {
  Published out;
  loupe::HealthReport report(out.sink(), /*replay=*/false);
  auto st = ring("memalloc", "events");
  st.received = 95;
  st.lost_kernel = 5;
  st.dropped_queue = 3;
  report.rings({st}, {}, /*is_final=*/true);

  const Row* lost = out.row("ring_lost_kernel", "memalloc/events");
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->value, 5u);
  EXPECT_EQ(lost->severity, LOUPE_HEALTH_WARN);
  EXPECT_EQ(lost->whole, 100u) << "lost + received: what the kernel side produced";
  EXPECT_EQ(lost->whole_unit, "records");
  EXPECT_EQ(lost->effect, LOUPE_HEALTH_EFFECT_LOST);
  EXPECT_NE(lost->message.find("ring full"), std::string::npos) << lost->message;
  EXPECT_TRUE(lost->is_final);

  const Row* dropped = out.row("ring_dropped_queue", "memalloc/events");
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(dropped->severity, LOUPE_HEALTH_WARN);
  EXPECT_NE(dropped->message.find("3 dropped with the queue full"), std::string::npos)
      << dropped->message;

  // The plugin's own row sums every counted loss of its rings.
  const Row* plugin = out.row("plugin_ring_loss", "memalloc");
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->value, 8u);
  EXPECT_EQ(plugin->whole, 100u);
}

TEST(HealthReport, NothingLostIsOkAndSaysNothing) {
  Published out;
  loupe::HealthReport report(out.sink(), false);
  auto st = ring("cpusample", "samples");
  st.received = 10;
  st.decoded = 10;
  report.rings({st}, {}, false);
  ASSERT_FALSE(out.rows.empty());
  for (const Row& r : out.rows) {
    EXPECT_EQ(r.severity, LOUPE_HEALTH_OK) << r.name;
    EXPECT_TRUE(r.message.empty()) << r.name << ": " << r.message;
    EXPECT_FALSE(r.is_final);
  }
}

TEST(HealthReport, ARingThatCannotCountItsLossIsSaidLiveButNotInAReplay) {
  for (bool replay : {false, true}) {
    Published out;
    loupe::HealthReport report(out.sink(), replay);
    auto st = ring("syscount", "events");
    st.lost_kernel_known = false;
    report.rings({st}, {}, true);
    const Row* unknown = out.row("ring_lost_kernel_unknown", "syscount/events");
    EXPECT_EQ(unknown != nullptr, !replay) << "replay " << replay;
    if (unknown) EXPECT_EQ(unknown->severity, LOUPE_HEALTH_WARN);
  }
}

TEST(HealthReport, CoalescedKeysAddUpAcrossReportsAndBeyondTheBoundReadOther) {
  Published out;
  loupe::HealthReport report(out.sink(), false);
  auto st = ring("offcpu", "events");
  report.rings({st}, {{"offcpu", "events", 0x2a, 3}}, false);
  report.rings({st},
               {{"offcpu", "events", 0x2a, 4},
                {"offcpu", "events", loupe::RingDispatcher::kCoalesceOverflowKey, 2}},
               true);
  std::map<std::string, double> last;
  for (const Metric& m : out.metrics)
    if (m.is_final) last[m.labels.at("key")] = m.value;
  EXPECT_EQ(last["0x2a"], 7.0) << "cumulative over the reports";
  EXPECT_EQ(last["other"], 2.0);
}

TEST(HealthReport, FinalFailuresNameTheProbeThePluginAndTheSink) {
  Published out;
  loupe::HealthReport report(out.sink(), false);
  loupe::ProbeResult ok{"latency", "enter", "prog_a", true, ""};
  loupe::ProbeResult bad{"latency", "exit", "prog_b", false, "no such tracepoint"};
  loupe::ProfilerHealth prof;
  prof.instance = "biolat";
  prof.collect_errors = 2;
  prof.disabled = true;
  report.final_failures({ok, bad}, {prof}, {}, "bpf_stats refused");

  EXPECT_EQ(out.row("probe_attach_failed", "latency/enter"), nullptr) << "attached: no row";
  const Row* attach = out.row("probe_attach_failed", "latency/exit");
  ASSERT_NE(attach, nullptr);
  EXPECT_EQ(attach->severity, LOUPE_HEALTH_ERROR);
  EXPECT_EQ(attach->message, "no such tracepoint");

  const Row* collect = out.row("plugin_collect_errors", "biolat");
  ASSERT_NE(collect, nullptr);
  EXPECT_EQ(collect->value, 2u);
  EXPECT_NE(collect->message.find("disabled"), std::string::npos) << collect->message;

  const Row* stats = out.row("probe_stats_unavailable", "loupe");
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(stats->message, "bpf_stats refused");
}

TEST(HealthReport, AFullRowsMapIsAWarningAndATreeNeverFollowedSaysWhy) {
  Published out;
  loupe::HealthReport report(out.sink(), false);
  report.unwind_tables(/*processes=*/3, /*files=*/40, /*rows=*/2048, /*row_bytes=*/8,
                       /*rows_full=*/2, /*write_errors=*/0, /*build_ns=*/5'000'000,
                       /*pending=*/0);
  report.process_tree(nullptr, "tp_btf refused");
  const Row* rows = out.row("unwind_tables", "unwind_tables");
  ASSERT_NE(rows, nullptr);
  EXPECT_NE(rows->message.find("(16 KiB) of 40 file(s) for 3 process(es), built in 5 ms"),
            std::string::npos)
      << rows->message;
  const Row* full = out.row("unwind_rows_full", "unwind_tables");
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->value, 2u);
  EXPECT_EQ(full->severity, LOUPE_HEALTH_WARN);
  EXPECT_EQ(out.row("unwind_entries_refused", "unwind_tables")->severity, LOUPE_HEALTH_OK);
  const Row* tree = out.row("process_tree_unavailable", "process_tree");
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(tree->severity, LOUPE_HEALTH_WARN);
  EXPECT_NE(tree->message.find("tp_btf refused"), std::string::npos) << tree->message;
}
