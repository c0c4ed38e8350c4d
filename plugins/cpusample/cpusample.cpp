// SPDX-License-Identifier: Apache-2.0
//
// On-CPU sampling profiler: a cpu-clock perf event per CPU at a fixed frequency (or
// period), user and kernel stacks counted in the kernel, folded into stack-sample
// records at collect().
#include <bpf/libbpf.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpusample.h"
#include "cpusample.skel.h"
#include "loupe/sdk/eviction.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/perf_event.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/thread_name.hpp"
#include "loupe/sdk/unwind.hpp"
#include "loupe/sdk/ustack.hpp"
#include "stack_reporter.hpp"

namespace loupe::cpusample {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"user_stacks", LOUPE_CFG_BOOL, 0, "true", "capture user stacks"},
    {"kernel_stacks", LOUPE_CFG_BOOL, 0, "true", "capture kernel stacks"},
    {"per_thread", LOUPE_CFG_BOOL, 0, "false", "keep threads apart (a tid label per stack)"},
    {"include_idle", LOUPE_CFG_BOOL, 0, "false", "also count samples of the idle task"},
    {"max_stacks", LOUPE_CFG_INT, 0, "16384", "distinct stacks kept (stack map size)", 64, 1048576},
    sdk::kKernelStackDepthKey,
    {"max_keys", LOUPE_CFG_INT, 0, "16384", "distinct (process, stacks) counts kept in the kernel",
     1, 1048576},
    {"symbolize_interval_ms", LOUPE_CFG_INT, 0, "250",
     "symbolize new stacks this often while their process runs (0 = only at collect)", 0, 60000},
};
constexpr auto kKeys =
    sdk::concat_keys(sdk::kSamplingKeys, sdk::kUstackKeys, kOwnKeys, sdk::kTargetFilterKeys);

// Ring records of the dwarf mode: unwind, count (on the core's ring worker thread).
class DwarfDecoder {
 public:
  DwarfDecoder(const sdk::Host& host, StackReporter& reporter, bool user)
      : unwinder_(host, CS_MAX_STACK_DEPTH), reporter_(reporter), user_(user) {}

  int decode(const void* data, std::uint32_t len) {
    if (len < sizeof(cs_dwarf_rec)) return LOUPE_ERR_INVALID_ARG;
    const auto* rec = static_cast<const cs_dwarf_rec*>(data);
    const std::uint32_t stack_len = len - static_cast<std::uint32_t>(sizeof(cs_dwarf_rec));
    if (rec->us.stack_len != stack_len) return LOUPE_ERR_INVALID_ARG;
    addrs_.clear();
    if (user_ && rec->has_user) unwinder_.unwind(rec->tgid, rec->us, rec + 1, stack_len, addrs_);
    reporter_.add_dwarf_sample(*rec, addrs_);
    return LOUPE_OK;
  }

  const sdk::UstackUnwinder& unwinder() const { return unwinder_; }

 private:
  sdk::UstackUnwinder unwinder_;
  StackReporter& reporter_;
  bool user_;
  std::vector<std::uint64_t> addrs_;  // reused: one decode at a time
};

}  // namespace

// Symbolizes new stacks periodically so processes that exit before the final report
// still get names. Stops (and joins) on destruction.
class SymbolWarmer {
 public:
  SymbolWarmer(StackReporter& reporter, std::chrono::milliseconds every)
      : thread_([this, &reporter, every] {
          sdk::name_this_thread("cpusample-warm");
          std::unique_lock lock(mu_);
          while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
            lock.unlock();
            reporter.warm();
            lock.lock();
          }
        }) {}
  ~SymbolWarmer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

class CpuSampleProfiler : public sdk::Profiler {
 public:
  ~CpuSampleProfiler() override { warmer_.reset(); }

  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
    spec_ = sdk::read_sampling_spec(cfg);
    // What one sample stands for: its period of CPU time (the kernel adapts the period
    // to the frequency), so on-CPU samples and off-CPU ns share a unit (time_ns).
    opts_.sample_ns = spec_.period_ns
                          ? spec_.period_ns
                          : 1000000000ull / std::max<std::uint64_t>(1, spec_.frequency_hz);
    const sdk::TargetFilter filter = sdk::read_target_filter(cfg, args.session);
    bool user = cfg.value_bool("user_stacks");
    bool kernel = cfg.value_bool("kernel_stacks");
    user_ = user;
    dwarf_ = cfg.value_string("unwind") == "dwarf";
    tables_ = user && sdk::use_unwind_tables(cfg, *host_, "cpusample");
    opts_.max_keys = static_cast<std::size_t>(cfg.value_int("max_keys"));
    opts_.max_stacks = static_cast<std::size_t>(cfg.value_int("max_stacks"));
    if (dwarf_ && user && !host_->can_unwind_user())
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "unwind = \"dwarf\" needs a host with the unwind_user service (ABI 1.2)");
    opts_.per_thread = cfg.value_bool("per_thread");
    opts_.evict = sdk::evicts_exited(args.session);
    warm_every_ms_ = cfg.value_int("symbolize_interval_ms");

    std::string why;
    if (!host_->feature("perf_event", &why))
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "perf_event programs are unavailable: " + why);

    skel_.reset(cpusample_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_user_stacks = user;
    ro->targ_kernel_stacks = kernel;
    ro->targ_per_thread = opts_.per_thread;
    ro->targ_include_idle = cfg.value_bool("include_idle");
    ro->targ_unwind_tables = tables_;
    sdk::size_unwind_maps(skel_.get(), args.host, tables_ ? sdk::unwind_rows(cfg, args.session) : 0,
                          static_cast<std::uint32_t>(cfg.value_int("max_stacks")),
                          sdk::python_frames(cfg));
    sdk::write_target_filter(filter, skel_.get());
    // User stacks go in the stack map only when the kernel walks them by frame pointers.
    const bool user_in_map = user && !tables_ && !dwarf_;
    sdk::size_stack_map(skel_->maps.stacks, static_cast<std::uint32_t>(cfg.value_int("max_stacks")),
                        user_in_map
                            ? sdk::kStackMapDepth
                            : static_cast<std::uint32_t>(cfg.value_int("kernel_stack_depth")));
    bpf_map__set_max_entries(skel_->maps.counts,
                             static_cast<std::uint32_t>(cfg.value_int("max_keys")));
    if (!user && !kernel) bpf_map__set_max_entries(skel_->maps.stacks, 1);
    ro->loupe_ustack_stack_bytes = static_cast<std::uint32_t>(cfg.value_int("stack_bytes"));
    // One program per mode; the other is never loaded (nor verified).
    bpf_program__set_autoload(dwarf_ ? skel_->progs.cs_sample : skel_->progs.cs_sample_dwarf,
                              false);
    // The dwarf mode counts in user space: nothing of its to hand over at an exit.
    if (dwarf_) {
      bpf_program__set_autoload(skel_->progs.cs_exit, false);
      bpf_map__set_max_entries(skel_->maps.handover_lists, 1);
      bpf_map__set_max_entries(skel_->maps.handover_ring, 4096);
    } else {
      bpf_map__set_max_entries(skel_->maps.handover_lists, kHandoverProcesses);
    }
    if (!dwarf_) {
      bpf_map__set_max_entries(skel_->maps.dwarf_ring, 4096);
      bpf_map__set_max_entries(skel_->maps.dwarf_scratch, 1);
    } else if (!user) {
      // Kernel stacks only: no user stack is copied, so no stack records are needed.
      ro->loupe_ustack_stack_bytes = 0;
    }
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       "loading the cpusample BPF object: " + host_->last_error());
    ReporterMaps maps;
    maps.counts_fd = bpf_map__fd(skel_->maps.counts);
    maps.stacks_fd = bpf_map__fd(skel_->maps.stacks);
    maps.counters_fd = bpf_map__fd(skel_->maps.counters);
    thinning_.bind(bpf_map__fd(skel_->maps.loupe_thin));
    maps.thinning = &thinning_;
    if (tables_) {
      sdk::attach_unwind_tables(*host_, skel_.get());
      maps.user_stacks_fd = bpf_map__fd(skel_->maps.loupe_unwind_stacks);
      maps.unwind_stats_fd = bpf_map__fd(skel_->maps.loupe_unwind_stats);
      maps.user_slots_fd = bpf_map__fd(skel_->maps.loupe_unwind_slots);
    }
    if (!dwarf_) maps.handover_lists_fd = bpf_map__fd(skel_->maps.handover_lists);
    reporter_ = std::make_unique<StackReporter>(*host_, maps, opts_);
    if (!dwarf_) {
      // Its losses are the counters' handover_full (the keys stay in the map), not the
      // ring's: no _lost map, and never sampled.
      handover_ = std::make_unique<sdk::CallbackDecoder<cs_handover_rec>>(
          [r = reporter_.get()](const cs_handover_rec& rec) {
            r->handed_over(rec.key, rec.value);
          });
      sdk::register_fixed_ring<cs_handover_rec>(
          *host_,
          {"exited_keys", bpf_map__fd(skel_->maps.handover_ring), CS_REC_HANDOVER,
           CS_REC_HANDOVER_VERSION, LOUPE_RING_MUST_KEEP, -1, -1},
          handover_.get());
      if (host_->bpf_attach(skel_->progs.cs_exit, "sched_process_exit") != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL, "attaching sched_process_exit: " + host_->last_error());
    }
    if (dwarf_) {
      decoder_ = std::make_unique<DwarfDecoder>(*host_, *reporter_, user_);
      sdk::FixedRing ring{"samples",
                          bpf_map__fd(skel_->maps.dwarf_ring),
                          CS_REC_DWARF,
                          CS_REC_DWARF_VERSION,
                          LOUPE_RING_DROPPABLE_SAMPLE,
                          bpf_map__fd(skel_->maps.dwarf_ring_lost),
                          -1};
      sdk::register_ustack_ring<cs_dwarf_rec>(*host_, ring, decoder_.get());
      const int stats_fd = bpf_map__fd(skel_->maps.loupe_ustack_stats);
      const DwarfDecoder* decoder = decoder_.get();
      reporter_->set_dwarf_health(
          [stats_fd, decoder](bool fin, std::uint64_t ws, std::uint64_t we) {
            decoder->unwinder().emit_health("cpusample", stats_fd, fin, ws, we);
          });
    }
    sdk::PerfEventSampler sampler(*host_, spec_);
    cpus_ =
        sampler.attach(dwarf_ ? skel_->progs.cs_sample_dwarf : skel_->progs.cs_sample, "cpu-clock");
    host_->info("sampling " + std::to_string(cpus_) + " CPUs at " + spec_.describe());
    if (warm_every_ms_ > 0)
      warmer_ =
          std::make_unique<SymbolWarmer>(*reporter_, std::chrono::milliseconds(warm_every_ms_));
  }

  // Under a budget: 1 in `divisor` samples kept, each counted as `divisor` (the same
  // estimate as sampling at frequency / divisor, at the cost of an early exit).
  void set_rate(const sdk::RateArgs& a) { thinning_.set(a.divisor); }

  void stop(const sdk::StopArgs&) override {
    warmer_.reset();
    if (reporter_) reporter_->stop_evicting();
  }

  void collect(const sdk::CollectArgs& args) override {
    if (!reporter_) return;
    reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, "cpus_sampled");
    rb.final(args.is_final).window(args.window_start_ns, args.window_end_ns);
    rb.metric(LOUPE_METRIC_GAUGE, "count", cpus_).emit(*host_);
  }

 private:
  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<cpusample_bpf> skel_;
  sdk::SamplingSpec spec_;
  ReporterOptions opts_;
  std::int64_t warm_every_ms_ = 250;
  int cpus_ = 0;
  bool user_ = true;
  bool dwarf_ = false;
  bool tables_ = false;
  sdk::Thinning thinning_;
  std::unique_ptr<StackReporter> reporter_;
  std::unique_ptr<DwarfDecoder> decoder_;
  // Keys handed over as their process exited (loupe/handover.bpf.h).
  std::unique_ptr<sdk::CallbackDecoder<cs_handover_rec>> handover_;
  std::unique_ptr<SymbolWarmer> warmer_;
  // Processes with keys at once whose keys leave the map at their exit (32 keys each);
  // the keys of more, or past 32, wait for user space's eviction as before.
  static constexpr std::uint32_t kHandoverProcesses = 512;
};

}  // namespace loupe::cpusample

LOUPE_PROFILER(loupe::cpusample::CpuSampleProfiler, "cpusample", "0.1.0",
               "on-CPU sampling: user + kernel stacks at a fixed frequency, counted in the kernel",
               loupe::cpusample::kKeys)
