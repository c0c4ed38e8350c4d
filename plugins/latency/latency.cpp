// SPDX-License-Identifier: Apache-2.0
//
// The latency-pairs profiler: times entry -> exit for every target of the profile
// (kernel functions, user functions, tracepoint pairs, syscalls) with one BPF object.
#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "latency.h"
#include "latency.skel.h"
#include "latency_reporter.hpp"
#include "library_resolver.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/unwind.hpp"
#include "loupe/sdk/ustack.hpp"
#include "outlier_decoder.hpp"
#include "probe_spec.hpp"
#include "target_attacher.hpp"
#include "target_resolver.hpp"

namespace loupe::latency {
namespace {

// No default: a label_type without label_arg is refused, which a default would hide.
constexpr const char* kLabelTypeChoices[] = {"int", "string", nullptr};

constexpr loupe_config_key kTargetFields[] = {
    {"name", LOUPE_CFG_STRING, 0, nullptr,
     "label of this target in reports (default: derived from the probe)"},
    {"kfunc", LOUPE_CFG_STRING, 0, nullptr, "kernel function: fentry/fexit, else kprobe/kretprobe"},
    {"ufunc", LOUPE_CFG_STRING, 0, nullptr,
     "user function binary:symbol[+offset], e.g. libc:malloc"},
    {"tracepoint_entry", LOUPE_CFG_STRING, 0, nullptr, "entry tracepoint category:name"},
    {"tracepoint_exit", LOUPE_CFG_STRING, 0, nullptr, "exit tracepoint category:name"},
    {"syscall", LOUPE_CFG_STRING, 0, nullptr,
     "syscall name: shorthand for its sys_enter/sys_exit pair"},
    {"usdt_entry", LOUPE_CFG_STRING, 0, nullptr,
     "USDT probe binary:provider:name that starts the pair (`loupe probes BINARY` lists them)"},
    {"usdt_exit", LOUPE_CFG_STRING, 0, nullptr, "USDT probe binary:provider:name that ends it"},
    {"usdt", LOUPE_CFG_STRING, 0, nullptr,
     "one USDT probe binary:provider:name, counted (no duration)"},
    {"label_arg", LOUPE_CFG_INT, 0, nullptr,
     "USDT targets: this argument of the (entry) probe, 0-based, becomes a label", 0, 11},
    {"label", LOUPE_CFG_STRING, 0, nullptr, "the label's name (default arg<N>)"},
    {"label_type", LOUPE_CFG_STRING, 0, nullptr,
     "\"int\" (default), or \"string\": the argument points to a string (first 47 bytes)", 0, 0,
     nullptr, 0, 0, kLabelTypeChoices},
};

constexpr const char* kNestingChoices[] = {"outermost", "every", nullptr};
constexpr const char* kMissingTargetChoices[] = {"error", "warn", nullptr};

constexpr loupe_config_key kOwnKeys[] = {
    {"targets", LOUPE_CFG_TABLE_LIST, LOUPE_CFG_REQUIRED, nullptr,
     "what to time: [[plugins.targets]] tables, one probe each", 0, 0, kTargetFields,
     static_cast<std::uint32_t>(std::size(kTargetFields))},
    {"nesting", LOUPE_CFG_STRING, 0, "\"outermost\"",
     "recursion: time the \"outermost\" call per thread, or \"every\" level", 0, 0, nullptr, 0, 0,
     kNestingChoices},
    {"max_age_ms", LOUPE_CFG_INT, 0, "10000",
     "entries older than this expire; longer durations are discarded", 1, 86400000},
    {"min_duration_ns", LOUPE_CFG_INT, 0, "0", "ignore calls shorter than this (counted)", 0,
     INT64_MAX},
    {"outlier_ns", LOUPE_CFG_INT, 0, "0", "send calls at least this long as events (0 = off)", 0,
     INT64_MAX},
    {"outlier_stacks", LOUPE_CFG_BOOL, 0, "false", "capture user and kernel stacks of outliers"},
    {"linear_buckets", LOUPE_CFG_BOOL, 0, "false",
     "8 sub-buckets per power of two (<= 12.5% error) instead of log2"},
    {"per_pid", LOUPE_CFG_BOOL, 0, "false", "also report one histogram per process"},
    {"per_comm", LOUPE_CFG_BOOL, 0, "false", "also report one histogram per command name"},
    {"breakdown_limit", LOUPE_CFG_INT, 0, "256",
     "most per-pid/per-comm histograms kept (the rest is counted)", 1, 65536},
    {"max_entries", LOUPE_CFG_INT, 0, "10240", "size of the in-flight correlation map", 16,
     4194304},
    {"missing_targets", LOUPE_CFG_STRING, 0, "\"error\"",
     "a target that cannot be traced: \"error\" fails the plugin, \"warn\" skips it", 0, 0, nullptr,
     0, 0, kMissingTargetChoices},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kUstackKeys, sdk::kTargetFilterKeys);

std::optional<std::string> opt_string(const sdk::Config& c, const char* key) {
  return c.get_string(key);
}

}  // namespace

class LatencyProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;

    // Choices, ranges and defaults are the schema's; the host validated them.
    const std::string nesting = cfg.value_string("nesting");
    const std::string missing = cfg.value_string("missing_targets");
    replay_ = args.session && LOUPE_ABI_HAS_FIELD(args.session, loupe_session_info, flags) &&
              (args.session->flags & LOUPE_SESSION_REPLAY);
    const sdk::TargetFilter filter = sdk::read_target_filter(cfg, args.session);
    const std::uint32_t pid = filter.pid;
    opts_.max_age_ns = static_cast<std::uint64_t>(cfg.value_int("max_age_ms")) * 1000000ull;
    opts_.linear = cfg.value_bool("linear_buckets");
    opts_.per_pid = cfg.value_bool("per_pid");
    opts_.per_comm = cfg.value_bool("per_comm");
    opts_.breakdown_limit = static_cast<std::uint64_t>(cfg.value_int("breakdown_limit"));
    if (args.session && args.session->target_pid > 0 && !args.session->target_command) {
      // --pid: the process exec'd before the session; what it runs is its exe now.
      const std::string exe = "/proc/" + std::to_string(args.session->target_pid) + "/exe";
      struct stat st {};
      char path[4096];
      const ssize_t n = ::readlink(exe.c_str(), path, sizeof(path) - 1);
      if (n > 0 && ::stat(exe.c_str(), &st) == 0)
        opts_.running.emplace_back(st.st_ino, std::string(path, static_cast<std::size_t>(n)));
    }

    auto tables = cfg.get_tables("targets");
    if (tables.empty())
      throw sdk::Error(LOUPE_ERR_INVALID_ARG, "no targets: add at least one [[plugins.targets]]");
    if (tables.size() > LAT_MAX_TARGETS)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG, std::to_string(tables.size()) + " targets; at most " +
                                                  std::to_string(LAT_MAX_TARGETS));

    auto libraries = LibraryResolver::from_system();
    TargetResolver resolver(*host_, libraries, LAT_FENTRY_SLOTS, static_cast<int>(pid));
    for (std::size_t i = 0; i < tables.size(); ++i) {
      const auto& t = tables[i];
      TargetSpec spec;
      try {
        spec = parse_target({opt_string(t, "name"), opt_string(t, "kfunc"), opt_string(t, "ufunc"),
                             opt_string(t, "tracepoint_entry"), opt_string(t, "tracepoint_exit"),
                             opt_string(t, "syscall"), opt_string(t, "usdt_entry"),
                             opt_string(t, "usdt_exit"), opt_string(t, "usdt")},
                            i);
      } catch (const std::invalid_argument& e) {
        throw sdk::Error(LOUPE_ERR_INVALID_ARG, e.what());
      }
      read_label(t, i, spec);
      for (const auto& r : targets_)
        if (r.spec.name == spec.name)
          throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                           "two targets are named '" + spec.name + "': give one a distinct name");
      try {
        targets_.push_back(resolver.resolve(spec));
      } catch (const sdk::Error& e) {
        if (missing == "error") throw;
        host_->warn(std::string("skipping ") + e.what());
        skipped_.push_back({spec.name, e.what()});
      }
    }
    if (targets_.empty())
      throw sdk::Error(LOUPE_ERR_NOT_FOUND, "none of the targets can be traced");
    // One program per mechanism serves every target through the attach cookie.
    std::string why;
    bool needs_cookie = std::any_of(targets_.begin(), targets_.end(), [](const auto& t) {
      return t.mechanism != Mechanism::kFentry;
    });
    if (needs_cookie && !host_->feature("bpf_cookie", &why))
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "this kernel lacks bpf_get_attach_cookie (" + why +
                           "), which the latency programs use to tell targets apart");

    skel_.reset(latency_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_nesting = nesting == "every" ? LAT_NEST_EVERY : LAT_NEST_OUTERMOST;
    ro->targ_max_age_ns = opts_.max_age_ns;
    ro->targ_min_duration_ns = static_cast<std::uint64_t>(cfg.value_int("min_duration_ns"));
    ro->targ_outlier_ns = static_cast<std::uint64_t>(cfg.value_int("outlier_ns"));
    ro->targ_outlier_stacks = cfg.value_bool("outlier_stacks");
    // unwind = "dwarf": outlier user stacks as copies unwound in user space.
    dwarf_ = cfg.value_string("unwind") == "dwarf" && ro->targ_outlier_stacks;
    if (dwarf_ && !host_->can_unwind_user())
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "unwind = \"dwarf\" needs a host with the unwind_user service (ABI 1.2)");
    ro->targ_outlier_dwarf = dwarf_;
    // unwind = "tables" (the default): outlier stacks by the in-kernel unwinder, so a libc
    // call's caller is kept and binaries without frame pointers unwind to main. The walk is
    // copied into the event: the unwinder's stack store is not used.
    tables_ = !replay_ && ro->targ_outlier_stacks && ro->targ_outlier_ns != 0 &&
              sdk::use_unwind_tables(cfg, *host_, "latency");
    ro->targ_outlier_tables = tables_;
    sdk::size_unwind_maps(skel_.get(), args.host, tables_ ? sdk::unwind_rows(cfg, args.session) : 0,
                          1, sdk::python_frames(cfg));
    ro->loupe_ustack_stack_bytes =
        dwarf_ ? static_cast<std::uint32_t>(cfg.value_int("stack_bytes")) : 0;
    if (!dwarf_) bpf_map__set_max_entries(skel_->maps.outliers_dwarf, 4096);
    ro->targ_linear = opts_.linear;
    ro->targ_per_pid = opts_.per_pid;
    ro->targ_per_comm = opts_.per_comm;
    sdk::write_target_filter(filter, skel_.get());
    outliers_on_ = ro->targ_outlier_ns != 0;

    bpf_map__set_max_entries(skel_->maps.starts,
                             static_cast<std::uint32_t>(cfg.value_int("max_entries")));
    if (opts_.per_pid || opts_.per_comm)
      bpf_map__set_max_entries(skel_->maps.breakdown,
                               static_cast<std::uint32_t>(cfg.value_int("breakdown_limit")));

    bool labelled = false;
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      const TargetSpec& s = targets_[i].spec;
      if (s.label_arg < 0) continue;
      labelled = true;
      ro->targ_label_arg[i] = static_cast<std::uint8_t>(s.label_arg + 1);
      ro->targ_label_str[i] = s.label_string;
    }
    // Unused label maps stay at one entry (a map cannot have none).
    if (labelled) {
      bpf_map__set_max_entries(skel_->maps.start_labels,
                               static_cast<std::uint32_t>(cfg.value_int("max_entries")));
      for (bpf_map* m : {skel_->maps.label_hists, skel_->maps.label_counts})
        bpf_map__set_max_entries(m, static_cast<std::uint32_t>(cfg.value_int("breakdown_limit")));
    }
    labelled_ = labelled;
    usdt_ = std::any_of(targets_.begin(), targets_.end(),
                        [](const ResolvedTarget& t) { return t.mechanism == Mechanism::kUsdt; });
    // Per-site counts are keyed by (target, site), not by process: the map holds every site
    // attached plus one unknown site per target, however many processes fire them.
    std::size_t site_slots = 0;
    for (const auto& t : targets_)
      if (t.mechanism == Mechanism::kUsdt) site_slots += t.sites.size() + 1;
    if (usdt_)
      bpf_map__set_max_entries(skel_->maps.site_counts, static_cast<std::uint32_t>(site_slots));
    for (std::size_t i = 0; i < targets_.size(); ++i)
      if (targets_[i].mechanism == Mechanism::kUsdt && targets_[i].usdt_sites == 1 &&
          targets_[i].sites.size() == 1)
        ro->targ_one_site[i] = targets_[i].sites.front().file_offset + 1;
    // Only a session with a target has "what the target ran" to tell: system-wide, every
    // exec of the machine would fill the map for nothing.
    user_probes_ =
        pid != 0 && std::any_of(targets_.begin(), targets_.end(), [](const ResolvedTarget& t) {
          return t.mechanism == Mechanism::kUsdt || t.mechanism == Mechanism::kUprobe;
        });
    bpf_program__set_autoload(skel_->progs.lat_exec, user_probes_ && !replay_);
    if (user_probes_) bpf_map__set_max_entries(skel_->maps.execs, LAT_MAX_EXECS);

    attacher_ = std::make_unique<TargetAttacher>(*host_, skel_.get(), filter.uprobe_pid());
    std::set<std::string> noted;  // once per file, however many targets probe it
    for (const auto& t : targets_)
      if ((t.mechanism == Mechanism::kUprobe || t.mechanism == Mechanism::kUsdt) &&
          noted.insert(t.binary_path).second)
        if (auto note = sdk::tree_uprobe_note(filter, "latency", t.binary_path); !note.empty())
          host_->info(note);
    attacher_->prepare(targets_);
    for (const auto& t : targets_)
      labels_.push_back({t.spec.name, to_string(t.mechanism), t.spec.kind == TargetKind::kUsdtCount,
                         t.spec.label_name, t.spec.label_string});
  }

  void start(const sdk::StartArgs&) override {
    // Replaying a capture: only the outlier ring exists (fed from the file); the
    // in-kernel histograms were not recorded, so there is nothing to load or collect.
    if (!replay_) {
      if (host_->bpf_load(skel_->obj) != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL,
                         "loading the latency BPF object: " + host_->last_error());
      if (tables_) sdk::attach_unwind_tables(*host_, skel_.get());
      attacher_->attach(targets_);
      // What the target runs, for the report of a user probe that never fires.
      if (user_probes_ && host_->bpf_attach(skel_->progs.lat_exec,
                                            "tracepoint:sched:sched_process_exec") != LOUPE_OK)
        host_->warn("latency: not following the target's execs (" + host_->last_error() +
                    "): a probe that never fires is reported without what the target ran");
    }
    if (outliers_on_) {
      decoder_ = std::make_unique<OutlierDecoder>(*host_, labels_);
      sdk::register_fixed_ring<lat_outlier_event>(
          *host_,
          {"outliers", replay_ ? -1 : bpf_map__fd(skel_->maps.outliers), LAT_RECORD_OUTLIER,
           LAT_RECORD_OUTLIER_VERSION, LOUPE_RING_MUST_KEEP,
           replay_ ? -1 : bpf_map__fd(skel_->maps.outliers_lost),
           replay_ ? -1 : bpf_map__fd(skel_->maps.outliers_divisor)},
          decoder_.get());
      if (dwarf_) {
        sdk::FixedRing ring{"outliers_dwarf",
                            replay_ ? -1 : bpf_map__fd(skel_->maps.outliers_dwarf),
                            LAT_RECORD_OUTLIER_DWARF,
                            LAT_RECORD_OUTLIER_DWARF_VERSION,
                            LOUPE_RING_MUST_KEEP,
                            replay_ ? -1 : bpf_map__fd(skel_->maps.outliers_dwarf_lost),
                            -1};
        sdk::register_ustack_ring<lat_outlier_dwarf>(*host_, ring, decoder_.get());
      }
    }
    if (replay_) return;
    ReporterMaps maps;
    maps.starts_fd = bpf_map__fd(skel_->maps.starts);
    maps.hists_fd = bpf_map__fd(skel_->maps.hists);
    maps.counters_fd = bpf_map__fd(skel_->maps.counters);
    if (opts_.per_pid || opts_.per_comm) maps.breakdown_fd = bpf_map__fd(skel_->maps.breakdown);
    if (usdt_) maps.site_counts_fd = bpf_map__fd(skel_->maps.site_counts);
    if (labelled_) {
      maps.start_labels_fd = bpf_map__fd(skel_->maps.start_labels);
      maps.label_hists_fd = bpf_map__fd(skel_->maps.label_hists);
      maps.label_counts_fd = bpf_map__fd(skel_->maps.label_counts);
    }
    if (user_probes_) {
      maps.execs_fd = bpf_map__fd(skel_->maps.execs);
      maps.execs_lost_fd = bpf_map__fd(skel_->maps.execs_lost);
    }
    std::vector<TargetProbeFile> files(targets_.size());
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      const auto& t = targets_[i];
      if (t.mechanism != Mechanism::kUsdt && t.mechanism != Mechanism::kUprobe) continue;
      files[i].binary = t.binary_path;
      files[i].program = t.binary_is_program;
      struct stat st {};
      if (::stat(t.binary_path.c_str(), &st) == 0) files[i].ino = st.st_ino;
      if (t.mechanism == Mechanism::kUsdt)
        for (const auto& site : t.sites) files[i].sites[site.file_offset] = site.name;
      else if (!t.sites.empty())
        files[i].uprobe_site = t.sites.front().name;
    }
    reporter_ = std::make_unique<LatencyReporter>(*host_, maps, opts_, labels_, std::move(files));
  }

  void collect(const sdk::CollectArgs& args) override {
    if (!reporter_) return;
    reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
    if (dwarf_ && decoder_)
      decoder_->unwinder().emit_health("latency", bpf_map__fd(skel_->maps.loupe_ustack_stats),
                                       args.is_final, args.window_start_ns, args.window_end_ns);
    if (tables_)
      sdk::emit_unwind_health(*host_, "latency", bpf_map__fd(skel_->maps.loupe_unwind_stats),
                              args.is_final, args.window_start_ns, args.window_end_ns);
    for (const auto& s : skipped_) {
      sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "target_skipped");
      rb.label("target", s.first).final(args.is_final);
      rb.health(LOUPE_HEALTH_ERROR, "latency/" + s.first, 1, s.second).emit(*host_);
    }
  }

 private:
  // label_arg / label / label_type of target table `i`: USDT targets only.
  static void read_label(const sdk::Config& t, std::size_t i, TargetSpec& spec) {
    auto arg = t.get_int("label_arg");
    auto name = t.get_string("label");
    auto type = t.get_string("label_type");
    const std::string where = "targets[" + std::to_string(i) + "] ('" + spec.name + "')";
    if (!arg) {
      if (name || type)
        throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                         where + ": label and label_type need label_arg (which argument)");
      return;
    }
    if (spec.kind != TargetKind::kUsdtPair && spec.kind != TargetKind::kUsdtCount)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                       where + ": label_arg reads a USDT probe's argument: usdt targets only");
    spec.label_arg = static_cast<int>(*arg);
    spec.label_name = name ? *name : "arg" + std::to_string(*arg);
    spec.label_string = type && *type == "string";
  }

  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<latency_bpf> skel_;
  std::vector<ResolvedTarget> targets_;
  std::vector<std::pair<std::string, std::string>> skipped_;
  std::vector<TargetLabels> labels_;
  ReporterOptions opts_;
  bool outliers_on_ = false;
  bool labelled_ = false;
  bool dwarf_ = false;
  bool tables_ = false;  // outlier user stacks by the in-kernel unwinder
  bool usdt_ = false;
  // A uprobe or USDT target in a session with a target: the target's execs are followed.
  bool user_probes_ = false;
  bool replay_ = false;  // loupe replay: decode recorded outliers, touch no kernel
  std::unique_ptr<TargetAttacher> attacher_;
  std::unique_ptr<OutlierDecoder> decoder_;
  std::unique_ptr<LatencyReporter> reporter_;
};

}  // namespace loupe::latency

LOUPE_PROFILER(loupe::latency::LatencyProfiler, "latency", "0.1.0",
               "entry/exit latency pairs: histograms, percentiles and outliers per target",
               loupe::latency::kKeys)
