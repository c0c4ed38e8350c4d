// SPDX-License-Identifier: Apache-2.0
//
// The lock-wait profiler: who waits, on which lock, for how long, and from where. User
// space waits are futex wait syscalls; kernel waits are lock:contention_begin/end.
#include <bpf/libbpf.h>

#include <cstring>
#include <memory>
#include <string>

#include "dwarf_waits.hpp"
#include "lock_reporter.hpp"
#include "lockwait.h"
#include "lockwait.skel.h"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/unwind.hpp"
#include "loupe/sdk/uprobe.hpp"
#include "loupe/sdk/ustack.hpp"
#include "symbol_cache.hpp"

namespace loupe::lockwait {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"futex", LOUPE_CFG_BOOL, 0, "true", "trace user-space waits (futex wait syscalls)"},
    {"kernel", LOUPE_CFG_BOOL, 0, "true",
     "trace kernel lock contention (lock:contention_begin/end)"},
    {"user_stacks", LOUPE_CFG_BOOL, 0, "true", "capture the user stack of each futex wait"},
    {"kernel_stacks", LOUPE_CFG_BOOL, 0, "true", "capture the kernel stack of each kernel wait"},
    {"pthread_stacks", LOUPE_CFG_BOOL, 0, "false",
     "uprobes on libc pthread_mutex_lock/pthread_rwlock_*lock: the futex wait takes the "
     "stack seen there, which keeps the lock's direct caller under unwind = \"fp\" (the "
     "default unwinder keeps it without; costs a uprobe per call)"},
    {"holders", LOUPE_CFG_BOOL, 0, "true",
     "who releases the lock: the stack of the thread whose futex wake ended each wait "
     "(lock_holder stacks, a user stack per wake call)"},
    {"libc", LOUPE_CFG_STRING, 0, "\"\"",
     "libc for pthread_stacks (default: the one the target process maps, else loupe's own)"},
    {"top", LOUPE_CFG_INT, 0, "10", "locks reported, by total wait", 1, 10000},
    {"stacks_per_lock", LOUPE_CFG_INT, 0, "20", "stack samples per reported lock (0 = all)", 0,
     100000},
    {"threads_per_lock", LOUPE_CFG_INT, 0, "16", "threads in each lock's breakdown", 1, 100000},
    {"min_wait_ns", LOUPE_CFG_INT, 0, "0", "ignore waits shorter than this", 0, INT64_MAX},
    {"max_age_ms", LOUPE_CFG_INT, 0, "10000",
     "waits older than this expire; longer ones are discarded", 1, 86400000},
    {"max_inflight", LOUPE_CFG_INT, 0, "10240", "waits in progress tracked at once", 16, 4194304},
    {"max_locks", LOUPE_CFG_INT, 0, "4096", "distinct locks aggregated", 1, 1048576},
    {"max_waiters", LOUPE_CFG_INT, 0, "16384", "distinct (lock, thread, stack) rows", 16, 4194304},
    {"max_stacks", LOUPE_CFG_INT, 0, "8192", "distinct stacks kept", 16, 1048576},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kUstackKeys, sdk::kTargetFilterKeys);

}  // namespace

class LockwaitProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
    opts_.futex = cfg.value_bool("futex");
    opts_.kernel = cfg.value_bool("kernel");
    opts_.pthread_stacks = cfg.value_bool("pthread_stacks");
    opts_.holders = cfg.value_bool("holders") && opts_.futex;
    opts_.top = static_cast<std::uint32_t>(cfg.value_int("top"));
    opts_.stacks_per_lock = static_cast<std::uint32_t>(cfg.value_int("stacks_per_lock"));
    opts_.threads_per_lock = static_cast<std::uint32_t>(cfg.value_int("threads_per_lock"));
    opts_.max_age_ns = static_cast<std::uint64_t>(cfg.value_int("max_age_ms")) * 1000000ull;
    if (!opts_.futex && !opts_.kernel)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG, "futex = false and kernel = false: nothing to trace");

    const sdk::TargetFilter filter = sdk::read_target_filter(cfg, args.session);
    check_features();

    skel_.reset(lockwait_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_max_age_ns = opts_.max_age_ns;
    ro->targ_min_wait_ns = static_cast<std::uint64_t>(cfg.value_int("min_wait_ns"));
    ro->targ_user_stacks = cfg.value_bool("user_stacks");
    ro->targ_kernel_stacks = cfg.value_bool("kernel_stacks");
    // unwind = "dwarf": futex wait stacks from copies (pthread_stacks is then moot: the
    // copy holds every caller the frame-pointer walk through libc loses).
    dwarf_ = cfg.value_string("unwind") == "dwarf" && opts_.futex && cfg.value_bool("user_stacks");
    if (dwarf_ && !host_->can_unwind_user())
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "unwind = \"dwarf\" needs a host with the unwind_user service (ABI 1.2)");
    if (dwarf_) opts_.pthread_stacks = false;
    max_waiters_ = static_cast<std::size_t>(cfg.value_int("max_waiters"));
    ro->targ_dwarf = dwarf_;
    ro->loupe_ustack_stack_bytes =
        dwarf_ ? static_cast<std::uint32_t>(cfg.value_int("stack_bytes")) : 0;
    if (!dwarf_) bpf_map__set_max_entries(skel_->maps.dwarf_waits, 4096);
    // unwind = "tables": waiters' and holders' user stacks by the in-kernel unwinder.
    tables_ = !dwarf_ && opts_.futex && cfg.value_bool("user_stacks") &&
              sdk::use_unwind_tables(cfg, *host_, "lockwait");
    ro->targ_unwind_tables = tables_;
    sdk::size_unwind_maps(skel_.get(), args.host, tables_ ? sdk::unwind_rows(cfg, args.session) : 0,
                          static_cast<std::uint32_t>(cfg.value_int("max_stacks")),
                          sdk::python_frames(cfg));
    ro->targ_pthread_stacks = opts_.pthread_stacks;
    ro->targ_holders = opts_.holders;
    sdk::write_target_filter(filter, skel_.get());
    target_pid_ = static_cast<int>(filter.pid);
    uprobe_pid_ = filter.uprobe_pid();  // -1 when following the tree: children too
    // The schema bounds every max_* key below 2^32 and supplies its default.
    auto entries = [&](const char* key) { return static_cast<std::uint32_t>(cfg.value_int(key)); };
    bpf_map__set_max_entries(skel_->maps.inflight, entries("max_inflight"));
    bpf_map__set_max_entries(skel_->maps.pending, entries("max_inflight"));
    bpf_map__set_max_entries(skel_->maps.locks, entries("max_locks"));
    bpf_map__set_max_entries(skel_->maps.holders, entries("max_locks"));
    bpf_map__set_max_entries(skel_->maps.wakes, 4 * entries("max_locks"));
    bpf_map__set_max_entries(skel_->maps.waiters, entries("max_waiters"));
    bpf_map__set_max_entries(skel_->maps.stacks, entries("max_stacks"));
    choose_programs();
    if (opts_.pthread_stacks) {
      libc_ = cfg.value_string("libc");
      if (libc_.empty()) libc_ = sdk::locate_library(target_pid_, "libc");
      if (auto note = sdk::tree_uprobe_note(filter, "lockwait pthread_stacks", libc_);
          !note.empty())
        host_->info(note);
    }
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the lockwait BPF object: " + host_->last_error());
    auto* p = &skel_->progs;
    if (opts_.futex) {
      attach(p->lw_futex_enter, "sys_enter_futex");
      attach(p->lw_futex_exit, "sys_exit_futex");
      if (futex_wait_) {
        attach(p->lw_futex_wait_enter, "sys_enter_futex_wait");
        attach(p->lw_futex_wait_exit, "sys_exit_futex_wait");
      }
      if (futex_waitv_) {
        attach(p->lw_futex_waitv_enter, "sys_enter_futex_waitv");
        attach(p->lw_futex_waitv_exit, "sys_exit_futex_waitv");
      }
      if (opts_.pthread_stacks) attach_pthread();
    }
    if (opts_.kernel) {
      bool btf = opts_.kernel_mechanism == "tp_btf";
      attach(btf ? p->lw_contention_begin_btf : p->lw_contention_begin, "lock:contention_begin");
      attach(btf ? p->lw_contention_end_btf : p->lw_contention_end, "lock:contention_end");
    }
    int user_stacks_fd = bpf_map__fd(skel_->maps.stacks);
    std::uint32_t user_depth = LW_STACK_DEPTH;
    if (tables_) {
      sdk::attach_unwind_tables(*host_, skel_.get());
      user_stacks_fd = bpf_map__fd(skel_->maps.loupe_unwind_stacks);
      user_depth = LOUPE_UNWIND_MAX_DEPTH;
    }
    symbols_ = std::make_unique<SymbolCache>(*host_, bpf_map__fd(skel_->maps.stacks),
                                             user_stacks_fd, user_depth);
    // No divisor: every first sighting matters.
    sdk::register_fixed_ring<lw_first_seen_event>(
        *host_,
        {"first_seen", bpf_map__fd(skel_->maps.first_seen), LW_RECORD_FIRST_SEEN,
         LW_RECORD_FIRST_SEEN_VERSION, LOUPE_RING_MUST_KEEP,
         bpf_map__fd(skel_->maps.first_seen_lost), -1},
        symbols_.get());
    ReporterMaps maps;
    maps.inflight_fd = bpf_map__fd(skel_->maps.inflight);
    maps.locks_fd = bpf_map__fd(skel_->maps.locks);
    maps.waiters_fd = bpf_map__fd(skel_->maps.waiters);
    maps.counters_fd = bpf_map__fd(skel_->maps.counters);
    maps.holders_fd = bpf_map__fd(skel_->maps.holders);
    reporter_ = std::make_unique<LockReporter>(*host_, maps, opts_, *symbols_);
    if (dwarf_) {
      dwarf_waits_ = std::make_unique<DwarfWaits>(*host_, *symbols_, max_waiters_);
      sdk::FixedRing ring{"dwarf_waits",
                          bpf_map__fd(skel_->maps.dwarf_waits),
                          LW_RECORD_DWARF_WAIT,
                          LW_RECORD_DWARF_WAIT_VERSION,
                          LOUPE_RING_MUST_KEEP,
                          bpf_map__fd(skel_->maps.dwarf_waits_lost),
                          -1};
      sdk::register_ustack_ring<lw_dwarf_wait>(*host_, ring, dwarf_waits_.get());
      reporter_->set_extra_waiters([w = dwarf_waits_.get()] { return w->rows(); });
    }
  }

  void collect(const sdk::CollectArgs& args) override {
    if (reporter_) reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
    if (tables_)
      sdk::emit_unwind_health(*host_, "lockwait", bpf_map__fd(skel_->maps.loupe_unwind_stats),
                              args.is_final, args.window_start_ns, args.window_end_ns);
    if (dwarf_waits_) {
      dwarf_waits_->unwinder().emit_health("lockwait", bpf_map__fd(skel_->maps.loupe_ustack_stats),
                                           args.is_final, args.window_start_ns, args.window_end_ns);
      sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "dwarf_rows_full");
      rb.final(args.is_final).window(args.window_start_ns, args.window_end_ns);
      const std::uint64_t full = dwarf_waits_->rows_full();
      rb.health(full ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "lockwait", full,
                full ? "waits whose (lock, thread, stack) row did not fit max_waiters: in the "
                       "lock totals only"
                     : "");
      rb.emit(*host_);
    }
  }

 private:
  // Probe, never compare versions: each hook is used only if this kernel has it.
  void check_features() {
    std::string why;
    if (!host_->feature("tracepoint", &why))
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "tracepoints unavailable: " + why);
    if (opts_.futex) {
      if (!host_->tracepoint_exists("syscalls:sys_enter_futex"))
        throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                         "tracepoint syscalls:sys_enter_futex is absent (CONFIG_FTRACE_SYSCALLS "
                         "off?): set futex = false to trace kernel locks only");
      futex_wait_ = host_->tracepoint_exists("syscalls:sys_enter_futex_wait");
      futex_waitv_ = host_->tracepoint_exists("syscalls:sys_enter_futex_waitv");
    }
    if (opts_.kernel) {
      if (!host_->tracepoint_exists("lock:contention_begin")) {
        // Linux 5.19+ with CONFIG_LOCKDEP-free lock tracepoints; older kernels have none.
        if (!opts_.futex)
          throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                           "tracepoint lock:contention_begin is absent on this kernel");
        host_->warn(
            "lock:contention_begin is absent on this kernel: kernel lock waits are "
            "not traced (set kernel = false to silence this)");
        opts_.kernel = false;
      } else {
        opts_.kernel_mechanism = host_->feature("tp_btf") ? "tp_btf" : "tracepoint";
      }
    }
    if (opts_.pthread_stacks && !host_->feature("uprobe", &why))
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "pthread_stacks needs uprobes: " + why);
  }

  void choose_programs() {
    auto* p = &skel_->progs;
    auto on = [](bpf_program* prog, bool v) { bpf_program__set_autoload(prog, v); };
    on(p->lw_futex_enter, opts_.futex);
    on(p->lw_futex_exit, opts_.futex);
    on(p->lw_futex_wait_enter, opts_.futex && futex_wait_);
    on(p->lw_futex_wait_exit, opts_.futex && futex_wait_);
    on(p->lw_futex_waitv_enter, opts_.futex && futex_waitv_);
    on(p->lw_futex_waitv_exit, opts_.futex && futex_waitv_);
    bool btf = opts_.kernel && opts_.kernel_mechanism == "tp_btf";
    bool tp = opts_.kernel && !btf;
    on(p->lw_contention_begin_btf, btf);
    on(p->lw_contention_end_btf, btf);
    on(p->lw_contention_begin, tp);
    on(p->lw_contention_end, tp);
    on(p->lw_pthread_lock, opts_.futex && opts_.pthread_stacks);
  }

  void attach(bpf_program* prog, const std::string& probe) {
    if (host_->bpf_attach(prog, probe) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "attaching " + probe + ": " + host_->last_error());
  }

  void attach_pthread() {
    for (const char* fn :
         {"pthread_mutex_lock", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock"}) {
      LIBBPF_OPTS(bpf_uprobe_opts, o);
      std::uint64_t off = sdk::find_elf_function(libc_, fn).file_offset;
      bpf_link* link = bpf_program__attach_uprobe_opts(skel_->progs.lw_pthread_lock, uprobe_pid_,
                                                       libc_.c_str(), off, &o);
      int err = link ? 0 : errno;
      host_->adopt_link(link, skel_->progs.lw_pthread_lock, libc_ + ":" + fn, err,
                        sdk::uprobe_target(libc_, off, false));
      if (!link)
        throw sdk::Error(LOUPE_ERR_KERNEL,
                         "uprobe on " + libc_ + ":" + fn + ": " + std::strerror(err));
    }
  }

  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<lockwait_bpf> skel_;
  ReporterOptions opts_;
  bool futex_wait_ = false, futex_waitv_ = false;
  int target_pid_ = 0;
  int uprobe_pid_ = -1;
  std::string libc_;
  std::unique_ptr<SymbolCache> symbols_;
  std::unique_ptr<LockReporter> reporter_;
  std::unique_ptr<DwarfWaits> dwarf_waits_;
  bool dwarf_ = false;
  bool tables_ = false;
  std::size_t max_waiters_ = 0;
};

}  // namespace loupe::lockwait

LOUPE_PROFILER(loupe::lockwait::LockwaitProfiler, "lockwait", "0.1.0",
               "lock waits: futex and kernel lock contention per lock, thread and stack",
               loupe::lockwait::kKeys)
