// SPDX-License-Identifier: Apache-2.0
//
// JIT region tracking: executable memory installed and removed at run time, per process,
// with CPU samples attributed to the regions and to their JIT symbols (perf maps).
#include <bpf/libbpf.h>

#include <cstring>
#include <memory>
#include <string>

#include "jit_tracker.hpp"
#include "jitregions.h"
#include "jitregions.skel.h"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/perf_event.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"

namespace loupe::jitregions {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"sample", LOUPE_CFG_BOOL, 0, "true", "sample CPUs and attribute samples to regions"},
    {"file_backed", LOUPE_CFG_BOOL, 0, "false",
     "also track file-backed executable mappings (every shared library load)"},
    {"max_processes", LOUPE_CFG_INT, 0, "1024",
     "processes tracked (in the kernel and in the region table)", 1, 1048576},
    {"max_threads", LOUPE_CFG_INT, 0, "4096",
     "threads inside an mmap/mprotect/munmap at once; more are counted (jitregions/pending_full)",
     16, 4194304},
    {"max_regions", LOUPE_CFG_INT, 0, "4096", "live regions kept per process (oldest evicted)", 1,
     1048576},
    {"max_retired", LOUPE_CFG_INT, 0, "256", "removed regions kept per process until reported", 0,
     1048576},
};
// No tid filter: a region one thread maps is executed by the others.
constexpr auto kKeys =
    sdk::concat_keys(sdk::kSamplingKeys, kOwnKeys, sdk::kPidKey, sdk::kCommKey, sdk::kCgroupKey);

}  // namespace

class JitRegionsProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
    spec_ = sdk::read_sampling_spec(cfg);
    sample_ = cfg.value_bool("sample");
    const sdk::TargetFilter filter = sdk::read_target_filter(cfg, args.session);
    // Attached to a running process (--pid, not a command loupe starts): its existing JIT
    // regions are read from /proc once the probes are in place.
    if (args.session && args.session->target_pid > 0 && !args.session->target_command)
      attach_pid_ = static_cast<std::uint32_t>(args.session->target_pid);
    limits_.max_processes = static_cast<std::size_t>(cfg.value_int("max_processes"));
    limits_.max_regions = static_cast<std::size_t>(cfg.value_int("max_regions"));
    limits_.max_retired = static_cast<std::size_t>(cfg.value_int("max_retired"));

    for (const char* tp : {"syscalls:sys_enter_mmap", "syscalls:sys_enter_mprotect",
                           "syscalls:sys_enter_munmap", "sched:sched_process_exit"})
      if (!host_->tracepoint_exists(tp))
        throw sdk::Error(LOUPE_ERR_NOT_FOUND, std::string("tracepoint ") + tp +
                                                  " is absent (syscall tracepoints need "
                                                  "CONFIG_FTRACE_SYSCALLS and tracefs)");
    std::string why;
    if (sample_ && !host_->feature("perf_event", &why))
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "perf_event programs are unavailable: " + why +
                                                  " (set sample = false to track regions only)");

    skel_.reset(jitregions_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_file_backed = cfg.value_bool("file_backed");
    bpf_map__set_max_entries(skel_->maps.procs, static_cast<std::uint32_t>(limits_.max_processes));
    bpf_map__set_max_entries(skel_->maps.pending,
                             static_cast<std::uint32_t>(cfg.value_int("max_threads")));
    sdk::write_target_filter(filter, skel_.get());
    pkey_ = host_->tracepoint_exists("syscalls:sys_enter_pkey_mprotect");
    bpf_program__set_autoload(skel_->progs.jr_pkey_mprotect_enter, pkey_);
    bpf_program__set_autoload(skel_->progs.jr_pkey_mprotect_exit, pkey_);
    bpf_program__set_autoload(skel_->progs.jr_sample, sample_);
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       "loading the jitregions BPF object: " + host_->last_error());
    tracker_ = std::make_unique<JitTracker>(*host_, limits_);
    // Region changes must not be lost; samples are few (99 Hz, tracked processes only).
    // No divisor: sampling out region changes would corrupt the table.
    sdk::register_fixed_ring<jr_event>(
        *host_,
        {"events", bpf_map__fd(skel_->maps.events), JR_RECORD, JR_RECORD_VERSION,
         LOUPE_RING_MUST_KEEP, bpf_map__fd(skel_->maps.events_lost), -1},
        tracker_.get());

    auto& p = skel_->progs;
    // Exit halves first: an exit without its entry finds nothing pending and is harmless.
    struct Tp {
      bpf_program* prog;
      const char* name;
    };
    std::vector<Tp> tps = {{p.jr_mmap_exit, "syscalls:sys_exit_mmap"},
                           {p.jr_mprotect_exit, "syscalls:sys_exit_mprotect"},
                           {p.jr_munmap_exit, "syscalls:sys_exit_munmap"},
                           {p.jr_mmap_enter, "syscalls:sys_enter_mmap"},
                           {p.jr_mprotect_enter, "syscalls:sys_enter_mprotect"},
                           {p.jr_munmap_enter, "syscalls:sys_enter_munmap"},
                           {p.jr_process_exit, "sched:sched_process_exit"},
                           {p.jr_process_exec, "sched:sched_process_exec"}};
    if (pkey_) {
      tps.insert(tps.begin(), {p.jr_pkey_mprotect_exit, "syscalls:sys_exit_pkey_mprotect"});
      tps.push_back({p.jr_pkey_mprotect_enter, "syscalls:sys_enter_pkey_mprotect"});
    }
    for (const auto& tp : tps) {
      std::string name = tp.name;
      auto colon = name.find(':');
      bpf_link* link = bpf_program__attach_tracepoint(tp.prog, name.substr(0, colon).c_str(),
                                                      name.substr(colon + 1).c_str());
      int err = link ? 0 : errno;
      host_->adopt_link(link, tp.prog, name.substr(colon + 1), err);
      if (!link)
        throw sdk::Error(LOUPE_ERR_KERNEL, "attaching " + name + ": " + std::strerror(err));
    }
    // After the probes: a region installed from here on arrives as an event and replaces
    // its seeded twin; nothing installed in between is missed.
    if (attach_pid_) {
      std::size_t n = tracker_->seed_existing(attach_pid_, host_->now_ns(LOUPE_CLOCK_BOOTTIME));
      host_->info("jitregions: " + std::to_string(n) +
                  " executable anonymous regions already in pid " + std::to_string(attach_pid_));
    }
    if (sample_) {
      sdk::PerfEventSampler sampler(*host_, spec_);
      int cpus = sampler.attach(p.jr_sample, "cpu-clock");
      host_->info("jitregions: sampling " + std::to_string(cpus) + " CPUs at " + spec_.describe());
    }
  }

  void collect(const sdk::CollectArgs& args) override {
    // Counts since the session began (the tables are never cleared): so is every window.
    if (tracker_) tracker_->report(args.is_final, args.session_start_ns, args.window_end_ns);
    if (!skel_) return;
    const std::uint32_t zero = 0;
    const auto c = sdk::read_per_cpu_sum<jr_counters>(bpf_map__fd(skel_->maps.counters), &zero);
    const sdk::HealthRow rows[] = {
        {"jitregions/pending_full", c.pending_full,
         "mmap/mprotect/munmap calls not seen: too many threads inside one at once, so regions "
         "may be missing or stale (raise max_threads)"},
        {"jitregions/procs_full", c.procs_full,
         "processes not tracked in the kernel: their regions and samples are missing (raise "
         "max_processes)"},
    };
    sdk::emit_health_rows(*host_, "kernel_maps", rows, args.is_final, args.session_start_ns,
                          args.window_end_ns);
  }

 private:
  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<jitregions_bpf> skel_;
  sdk::SamplingSpec spec_;
  TableLimits limits_;
  bool sample_ = true;
  bool pkey_ = false;
  std::unique_ptr<JitTracker> tracker_;
  std::uint32_t attach_pid_ = 0;
};

}  // namespace loupe::jitregions

LOUPE_PROFILER(loupe::jitregions::JitRegionsProfiler, "jitregions", "0.1.0",
               "JIT code regions (mmap/mprotect/munmap with PROT_EXEC) with CPU samples "
               "attributed to them and their perf-map symbols",
               loupe::jitregions::kKeys)
