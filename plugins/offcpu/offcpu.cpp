// SPDX-License-Identifier: Apache-2.0
//
// offcpu: where the target's threads wait off the CPU (by stack and reason), who woke
// them, how long they then waited for a CPU (run-queue latency per process and per CPU),
// and which tasks held the CPU meanwhile. From sched_switch and sched_waking (tp_btf,
// else raw_tp, else the classic tracepoints, chosen by probing).
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "loupe/sdk/flavour.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/unwind.hpp"
#include "offcpu.h"
#include "offcpu.skel.h"
#include "offcpu_reporter.hpp"

namespace loupe::offcpu {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"min_block_ns", LOUPE_CFG_INT, 0, "1000",
     "blocks shorter than this are counted but not aggregated by stack", 0, INT64_MAX},
    {"wakers", LOUPE_CFG_BOOL, 0, "true",
     "take the stack of the task that wakes each blocked thread (offcpu_wakers records)"},
    {"run_queue", LOUPE_CFG_BOOL, 0, "true",
     "run-queue latency per process and CPU, and its blockers (false: off-CPU stacks only, "
     "and without wakers no sched_waking hook: the cheapest switch)"},
    {"runq_threshold_ns", LOUPE_CFG_INT, 0, "1000000",
     "run-queue waits at least this long record the stack of the task that held the CPU "
     "(runq_blockers; 0 = off)",
     0, INT64_MAX},
    {"per_thread", LOUPE_CFG_BOOL, 0, "false", "one stack row per thread (tid label)"},
    {"user_stacks", LOUPE_CFG_BOOL, 0, "true", "take user stacks"},
    {"kernel_stacks", LOUPE_CFG_BOOL, 0, "true", "take kernel stacks"},
    {"max_threads", LOUPE_CFG_INT, 0, "16384",
     "threads off the CPU at once that can be tracked; more are counted as lost", 64, 4194304},
    {"max_keys", LOUPE_CFG_INT, 0, "16384",
     "distinct (process, stacks, reason, waker) rows kept; the rest is counted", 1, 4194304},
    {"max_stacks", LOUPE_CFG_INT, 0, "16384", "stack map size", 64, 4194304},
    sdk::kKernelStackDepthKey,
    {"process_limit", LOUPE_CFG_INT, 0, "1024", "processes with a run-queue histogram of their own",
     1, 65536},
    {"max_blockers", LOUPE_CFG_INT, 0, "4096",
     "distinct (process, stacks) rows of tasks that held a CPU a thread waited for; the rest is "
     "counted",
     16, 4194304},
};
constexpr auto kKeys =
    sdk::concat_keys(kOwnKeys, sdk::kUnwindKeys, sdk::kMechanismKey, sdk::kTargetFilterKeys);

constexpr const char* kHooks[] = {"sched_switch", "sched_waking"};

}  // namespace

class OffcpuProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
    mechanism_ =
        sdk::choose_flavour(*host_, cfg.value_string("mechanism"), "sched", {kHooks[0], kHooks[1]});

    skel_.reset(offcpu_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_min_block_ns = static_cast<std::uint64_t>(cfg.value_int("min_block_ns"));
    ro->targ_wakers = cfg.value_bool("wakers");
    ro->targ_run_queue = cfg.value_bool("run_queue");
    ro->targ_runq_threshold_ns =
        ro->targ_run_queue ? static_cast<std::uint64_t>(cfg.value_int("runq_threshold_ns")) : 0;
    ro->targ_per_thread = cfg.value_bool("per_thread");
    ro->targ_user_stacks = cfg.value_bool("user_stacks");
    ro->targ_kernel_stacks = cfg.value_bool("kernel_stacks");
    sdk::apply_target_filter(cfg, args.session, skel_.get());
    tables_ = ro->targ_user_stacks && sdk::use_unwind_tables(cfg, *host_, "offcpu");
    ro->targ_unwind_tables = tables_;
    sdk::size_unwind_maps(skel_.get(), args.host, tables_ ? sdk::unwind_rows(cfg, args.session) : 0,
                          static_cast<std::uint32_t>(cfg.value_int("max_stacks")),
                          sdk::python_frames(cfg));

    opts_.per_thread = ro->targ_per_thread;
    opts_.wakers = ro->targ_wakers;
    opts_.run_queue = ro->targ_run_queue;
    opts_.runq_threshold_ns = ro->targ_runq_threshold_ns;
    // A wake-up matters only to run-queue waits and wakers: without both, the sched_waking
    // program (a run per wake-up) is not loaded at all.
    hooks_ = ro->targ_run_queue || ro->targ_wakers ? 2 : 1;
    opts_.mechanism = sdk::kFlavourNames[mechanism_];
    opts_.evict = sdk::evicts_exited(args.session);

    bpf_program* progs[3][2] = {{skel_->progs.oc_btf_switch, skel_->progs.oc_btf_waking},
                                {skel_->progs.oc_raw_switch, skel_->progs.oc_raw_waking},
                                {skel_->progs.oc_tp_switch, skel_->progs.oc_tp_waking}};
    for (std::uint32_t m = 0; m < 3; ++m)
      for (std::uint32_t h = 0; h < 2; ++h)
        bpf_program__set_autoload(progs[m][h], m == mechanism_ && h < hooks_);
    for (std::uint32_t h = 0; h < 2; ++h) chosen_[h] = progs[mechanism_][h];

    auto size = [&](bpf_map* m, const char* key) {
      bpf_map__set_max_entries(m, static_cast<std::uint32_t>(cfg.value_int(key)));
    };
    size(skel_->maps.blocked, "max_threads");
    size(skel_->maps.offcpu, "max_keys");
    // User stacks go in the stack map only when the kernel walks them by frame pointers.
    sdk::size_stack_map(skel_->maps.stacks, static_cast<std::uint32_t>(cfg.value_int("max_stacks")),
                        ro->targ_user_stacks && !tables_
                            ? sdk::kStackMapDepth
                            : static_cast<std::uint32_t>(cfg.value_int("kernel_stack_depth")));
    // Processes with keys at once whose keys leave the map at their exit (32 keys each); the
    // keys of more, or past 32, wait for user space's eviction as before.
    bpf_map__set_max_entries(skel_->maps.handover_lists, 512);
    size(skel_->maps.runq_procs, "process_limit");
    size(skel_->maps.blockers, "max_blockers");
    if (!opts_.run_queue)
      for (bpf_map* m : {skel_->maps.runq_procs, skel_->maps.blockers})
        bpf_map__set_max_entries(m, 1);
    host_->debug(std::string("offcpu: mechanism=") + sdk::kFlavourNames[mechanism_]);
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the offcpu BPF object: " + host_->last_error());
    for (std::uint32_t h = 0; h < hooks_; ++h)
      if (host_->bpf_attach(chosen_[h], kHooks[h]) != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL,
                         std::string("attaching ") + kHooks[h] + ": " + host_->last_error());
    if (tables_) sdk::attach_unwind_tables(*host_, skel_.get());
    ReporterMaps maps;
    maps.stacks_fd = bpf_map__fd(skel_->maps.stacks);
    if (tables_) {
      maps.user_stacks_fd = bpf_map__fd(skel_->maps.loupe_unwind_stacks);
      maps.unwind_stats_fd = bpf_map__fd(skel_->maps.loupe_unwind_stats);
      maps.user_slots_fd = bpf_map__fd(skel_->maps.loupe_unwind_slots);
    }
    maps.blocked_fd = bpf_map__fd(skel_->maps.blocked);
    maps.offcpu_fd = bpf_map__fd(skel_->maps.offcpu);
    maps.runq_procs_fd = bpf_map__fd(skel_->maps.runq_procs);
    maps.runq_cpus_fd = bpf_map__fd(skel_->maps.runq_cpus);
    maps.blockers_fd = bpf_map__fd(skel_->maps.blockers);
    maps.counters_fd = bpf_map__fd(skel_->maps.counters);
    thinning_.bind(bpf_map__fd(skel_->maps.loupe_thin));
    maps.thinning = &thinning_;
    maps.handover_lists_fd = bpf_map__fd(skel_->maps.handover_lists);
    reporter_ = std::make_unique<OffcpuReporter>(*host_, maps, opts_);
    // Its losses are the counters' handover_full (the keys stay in the map), not the
    // ring's: no _lost map, and never sampled.
    handover_ = std::make_unique<sdk::CallbackDecoder<oc_handover_rec>>(
        [r = reporter_.get()](const oc_handover_rec& rec) { r->handed_over(rec.key, rec.value); });
    sdk::register_fixed_ring<oc_handover_rec>(
        *host_,
        {"exited_keys", bpf_map__fd(skel_->maps.handover_ring), OC_REC_HANDOVER,
         OC_REC_HANDOVER_VERSION, LOUPE_RING_MUST_KEEP, -1, -1},
        handover_.get());
  }

  // Under a budget: 1 in `divisor` switch-outs takes its stacks and is followed to its
  // switch-in, and that block counts as `divisor` blocks of its length. The sched_switch
  // program still runs for every switch; what is saved is the stack walks and map updates.
  void set_rate(const sdk::RateArgs& a) { thinning_.set(a.divisor); }

  void stop(const sdk::StopArgs&) override {
    if (reporter_) reporter_->stop_evicting();
  }

  void collect(const sdk::CollectArgs& args) override {
    if (reporter_) reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
  }

 private:
  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<offcpu_bpf> skel_;
  std::uint32_t mechanism_ = sdk::kTpBtf;
  bool tables_ = false;
  bpf_program* chosen_[2] = {};
  std::uint32_t hooks_ = 2;  // sched_switch, and sched_waking unless nothing needs it
  ReporterOptions opts_;
  sdk::Thinning thinning_;
  std::unique_ptr<OffcpuReporter> reporter_;
  // Keys handed over as their process exited (loupe/handover.bpf.h).
  std::unique_ptr<sdk::CallbackDecoder<oc_handover_rec>> handover_;
};

}  // namespace loupe::offcpu

LOUPE_PROFILER(loupe::offcpu::OffcpuProfiler, "offcpu", "0.1.0",
               "time off the CPU by stack and reason, wakers, run-queue latency and blockers",
               loupe::offcpu::kKeys)
