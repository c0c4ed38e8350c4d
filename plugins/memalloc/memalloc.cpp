// SPDX-License-Identifier: Apache-2.0
//
// The memory allocation profiler: allocation stacks, bytes and leaks of a process's libc
// allocator (uprobes) and, optionally, of kernel memory (kmem tracepoints).
#include "memalloc.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

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

#include "allocator_attacher.hpp"
#include "dwarf_allocs.hpp"
#include "loupe/sdk/library.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/thread_name.hpp"
#include "loupe/sdk/unwind.hpp"
#include "loupe/sdk/ustack.hpp"
#include "memalloc.skel.h"
#include "memalloc_reporter.hpp"
#include "sample_scaling.hpp"
#include "stack_frames.hpp"

namespace loupe::memalloc {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"binary", LOUPE_CFG_STRING, 0, "\"\"",
     "ELF file holding the allocator (default: the libc.so.6 the target maps); without a pid, "
     "every process that maps it"},
    {"user", LOUPE_CFG_BOOL, 0, "true", "trace the user-space allocator (uprobes)"},
    {"functions", LOUPE_CFG_STRING_LIST, 0, nullptr,
     "allocator functions to trace (default: malloc calloc realloc posix_memalign aligned_alloc "
     "memalign valloc pvalloc free)"},
    {"kernel", LOUPE_CFG_BOOL, 0, "false",
     "also trace kernel memory: kmem:kmalloc/kfree, kmem_cache_alloc/free (kernel stacks)"},
    {"kernel_pages", LOUPE_CFG_BOOL, 0, "false",
     "with kernel: also the page allocator (kmem:mm_page_alloc/free)"},
    {"kernel_user_stacks", LOUPE_CFG_BOOL, 0, "true",
     "with kernel: add the user stack of the allocating task to the kernel stack"},
    {"sample_every", LOUPE_CFG_INT, 0, "1", "record 1 allocation in N (1 = all); counts scale by N",
     1, 1 << 30},
    {"sample_bytes", LOUPE_CFG_INT, 0, "0",
     "Poisson sampling: mean bytes between samples (0 = off); see README for the scaling", 0,
     INT64_C(1) << 40},
    {"top", LOUPE_CFG_INT, 0, "0",
     "report the N largest sites by bytes, by count and by outstanding bytes (0 = all)", 0,
     1000000},
    {"min_age_ms", LOUPE_CFG_INT, 0, "0",
     "live allocations younger than this are not reported as outstanding", 0, 86400000},
    {"leak_age_ms", LOUPE_CFG_INT, 0, "5000",
     "finding old_allocations: live allocations at least this old at the end are leak suspects", 1,
     86400000},
    {"max_sites", LOUPE_CFG_INT, 0, "16384", "allocation sites kept (overflow counted)", 1,
     4194304},
    {"max_outstanding", LOUPE_CFG_INT, 0, "131072",
     "live allocations tracked for the leak report (overflow counted)", 16, 16777216},
    {"max_stacks", LOUPE_CFG_INT, 0, "16384", "distinct stacks kept (overflow counted)", 16,
     4194304},
    {"max_threads", LOUPE_CFG_INT, 0, "16384", "allocator calls in flight (threads)", 16, 4194304},
    {"max_processes", LOUPE_CFG_INT, 0, "4096",
     "processes whose mappings are read while they live (overflow counted)", 1, 4194304},
};
// Only a pid: a tid, comm or cgroup filter would hide frees from other threads and
// report their blocks as leaks.
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kUstackKeys, sdk::kPidKey);

// Map sizes: the schema bounds each key below 2^32 and supplies its default.
std::uint32_t u32_key(const sdk::Config& cfg, const char* key) {
  return static_cast<std::uint32_t>(cfg.value_int(key));
}

}  // namespace

class MemallocProfiler : public sdk::Profiler {
 public:
  ~MemallocProfiler() override { stop_warmer(); }

  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
    const sdk::TargetFilter filter = sdk::read_target_filter(cfg, args.session);
    pid_ = static_cast<int>(filter.pid);
    uprobe_pid_ = filter.uprobe_pid();  // -1 when following the tree: children too
    user_ = cfg.value_bool("user");
    kernel_ = cfg.value_bool("kernel");
    kernel_pages_ = cfg.value_bool("kernel_pages");
    if (!user_ && !kernel_)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG, "user = false and kernel = false: nothing to trace");
    if (kernel_pages_ && !kernel_)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG, "kernel_pages = true needs kernel = true");

    std::int64_t every = cfg.value_int("sample_every");
    std::int64_t bytes = cfg.value_int("sample_bytes");
    if (every > 1 && bytes > 0)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                       "sample_every and sample_bytes are exclusive: choose one sampling mode");
    scaling_ = bytes > 0 ? SampleScaling::poisson(static_cast<std::uint64_t>(bytes))
                         : SampleScaling::one_in(static_cast<std::uint64_t>(every));
    sample_bytes_ = static_cast<std::uint64_t>(bytes);

    functions_ = cfg.get_strings("functions");
    if (functions_.empty()) functions_ = allocator_functions();
    for (const auto& f : functions_)
      if (std::find(allocator_functions().begin(), allocator_functions().end(), f) ==
          allocator_functions().end())
        throw sdk::Error(LOUPE_ERR_INVALID_ARG, "functions: '" + f +
                                                    "' is not one of malloc calloc realloc "
                                                    "posix_memalign aligned_alloc memalign valloc "
                                                    "pvalloc free");
    if (user_) {
      std::string why;
      if (!host_->feature("uprobe", &why))
        throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "uprobes are unavailable: " + why);
      binary_ = cfg.value_string("binary");
      if (binary_.empty()) {
        // A held `loupe run -- cmd` child still runs loupe's image: it will exec with
        // the same system libc, which is also what this process maps.
        binary_ = sdk::locate_library(pid_, "libc");
      } else if (::access(binary_.c_str(), R_OK) != 0) {
        throw sdk::Error(LOUPE_ERR_NOT_FOUND,
                         "binary = \"" + binary_ + "\": " + std::strerror(errno));
      }
      if (!pid_)
        host_->warn("memalloc: no pid: every process mapping " + binary_ +
                    " is traced (a uprobe costs microseconds per allocation)");
      if (auto note = sdk::tree_uprobe_note(filter, "memalloc", binary_); !note.empty())
        host_->info(note);
    }
    if (kernel_) {
      for (const char* tp :
           {"kmem:kmalloc", "kmem:kfree", "kmem:kmem_cache_alloc", "kmem:kmem_cache_free"})
        if (!host_->tracepoint_exists(tp))
          throw sdk::Error(LOUPE_ERR_NOT_FOUND, std::string("tracepoint ") + tp + " is absent");
    }

    skel_.reset(memalloc_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_sample_every = static_cast<std::uint32_t>(every);
    ro->targ_sample_bytes = sample_bytes_;
    ro->targ_kernel_user_stacks = cfg.value_bool("kernel_user_stacks");
    ro->targ_page_size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    // unwind = "dwarf": user allocation stacks from copies (kmem allocations keep theirs).
    dwarf_ = user_ && cfg.value_string("unwind") == "dwarf";
    if (dwarf_ && !host_->can_unwind_user())
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "unwind = \"dwarf\" needs a host with the unwind_user service (ABI 1.2)");
    ro->targ_dwarf = dwarf_;
    // unwind = "tables": user stacks (of user and, with kernel_user_stacks, kmem
    // allocations) by the in-kernel unwinder; kernel stacks stay in the stack map.
    tables_ = !dwarf_ && (user_ || ro->targ_kernel_user_stacks) &&
              sdk::use_unwind_tables(cfg, *host_, "memalloc");
    ro->targ_unwind_tables = tables_;
    sdk::size_unwind_maps(skel_.get(), args.host, tables_ ? sdk::unwind_rows(cfg, args.session) : 0,
                          u32_key(cfg, "max_stacks"), sdk::python_frames(cfg));
    ro->loupe_ustack_stack_bytes =
        dwarf_ ? static_cast<std::uint32_t>(cfg.value_int("stack_bytes")) : 0;
    if (!dwarf_) bpf_map__set_max_entries(skel_->maps.dwarf_events, 4096);
    sdk::write_target_filter(filter, skel_.get());

    opts_.top = static_cast<std::size_t>(cfg.value_int("top"));
    opts_.min_age_ns = static_cast<std::uint64_t>(cfg.value_int("min_age_ms")) * 1000000ull;
    opts_.leak_age_ns = static_cast<std::uint64_t>(cfg.value_int("leak_age_ms")) * 1000000ull;
    opts_.max_sites = u32_key(cfg, "max_sites");
    opts_.max_outstanding = u32_key(cfg, "max_outstanding");
    bpf_map__set_max_entries(skel_->maps.sites, opts_.max_sites);
    bpf_map__set_max_entries(skel_->maps.outstanding, opts_.max_outstanding);
    bpf_map__set_max_entries(skel_->maps.stacks, u32_key(cfg, "max_stacks"));
    bpf_map__set_max_entries(skel_->maps.pending, u32_key(cfg, "max_threads"));
    bpf_map__set_max_entries(skel_->maps.seen_pids, u32_key(cfg, "max_processes"));

    auto& p = skel_->progs;
    for (bpf_program* prog :
         {p.ma_malloc, p.ma_calloc, p.ma_realloc, p.ma_posix_memalign, p.ma_aligned_alloc,
          p.ma_memalign, p.ma_valloc, p.ma_pvalloc, p.ma_free, p.ma_alloc_exit})
      bpf_program__set_autoload(prog, user_);
    for (bpf_program* prog :
         {p.ma_kmalloc, p.ma_kmem_cache_alloc, p.ma_kfree, p.ma_kmem_cache_free})
      bpf_program__set_autoload(prog, kernel_);
    for (bpf_program* prog : {p.ma_page_alloc, p.ma_page_free})
      bpf_program__set_autoload(prog, kernel_pages_);
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the memalloc BPF object: " + host_->last_error());
    if (sample_bytes_) {
      auto table = SampleScaling::exponential_table(sample_bytes_, MA_EXP_TABLE);
      int fd = bpf_map__fd(skel_->maps.exp_table);
      for (std::uint32_t i = 0; i < table.size(); ++i)
        if (bpf_map_update_elem(fd, &i, &table[i], BPF_ANY) != 0)
          throw sdk::Error(LOUPE_ERR_KERNEL,
                           "filling the sampling table: " + std::string(std::strerror(errno)));
    }
    int user_stacks_fd = bpf_map__fd(skel_->maps.stacks);
    if (tables_) {
      sdk::attach_unwind_tables(*host_, skel_.get());
      user_stacks_fd = bpf_map__fd(skel_->maps.loupe_unwind_stacks);
    }
    frames_ =
        std::make_unique<StackFrames>(*host_, bpf_map__fd(skel_->maps.stacks), user_stacks_fd);
    std::vector<std::pair<std::string, std::string>> skipped;
    if (kernel_) {
      auto& p = skel_->progs;
      std::vector<std::pair<bpf_program*, const char*>> tps = {
          {p.ma_kmalloc, "kmem:kmalloc"},
          {p.ma_kmem_cache_alloc, "kmem:kmem_cache_alloc"},
          {p.ma_kfree, "kmem:kfree"},
          {p.ma_kmem_cache_free, "kmem:kmem_cache_free"}};
      if (kernel_pages_) {
        tps.emplace_back(p.ma_page_alloc, "kmem:mm_page_alloc");
        tps.emplace_back(p.ma_page_free, "kmem:mm_page_free");
      }
      for (auto [prog, name] : tps)
        if (host_->bpf_attach(prog, name) != LOUPE_OK)
          throw sdk::Error(LOUPE_ERR_KERNEL,
                           std::string("attaching ") + name + ": " + host_->last_error());
    }
    if (dwarf_) {
      dwarf_allocs_ =
          std::make_unique<DwarfAllocs>(*host_, *frames_, opts_.max_sites, opts_.max_outstanding);
      sdk::FixedRing ring{"dwarf_events",
                          bpf_map__fd(skel_->maps.dwarf_events),
                          MA_RECORD_DWARF,
                          MA_RECORD_DWARF_VERSION,
                          LOUPE_RING_MUST_KEEP,
                          bpf_map__fd(skel_->maps.dwarf_events_lost),
                          -1};
      // Frees are the ring's shortest records.
      sdk::register_ustack_ring<ma_dwarf_alloc>(*host_, ring, dwarf_allocs_.get(),
                                                sizeof(ma_dwarf_free));
    }
    if (user_) {
      AllocatorAttacher attacher(*host_, skel_.get(), binary_, uprobe_pid_);
      skipped = attacher.attach(functions_);
    }
    start_warmer();
    ReporterMaps maps;
    maps.sites_fd = bpf_map__fd(skel_->maps.sites);
    maps.outstanding_fd = bpf_map__fd(skel_->maps.outstanding);
    maps.counters_fd = bpf_map__fd(skel_->maps.counters);
    maps.sizes_fd = bpf_map__fd(skel_->maps.sizes);
    reporter_ = std::make_unique<MemallocReporter>(*host_, maps, opts_, scaling_, *frames_,
                                                   std::move(skipped));
    reporter_->set_dwarf(dwarf_allocs_.get());
  }

  void stop(const sdk::StopArgs&) override { stop_warmer(); }

  void collect(const sdk::CollectArgs& args) override {
    if (!reporter_) return;
    warm_new_processes();
    // Sites, totals and sizes since the session began: the records' window starts with it.
    reporter_->collect(args.is_final, args.session_start_ns, args.window_end_ns);
    if (tables_)
      sdk::emit_unwind_health(*host_, "memalloc", bpf_map__fd(skel_->maps.loupe_unwind_stats),
                              args.is_final, args.window_start_ns, args.window_end_ns);
    if (dwarf_allocs_) {
      dwarf_allocs_->unwinder().emit_health("memalloc", bpf_map__fd(skel_->maps.loupe_ustack_stats),
                                            args.is_final, args.window_start_ns,
                                            args.window_end_ns);
      sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "dwarf_tables_full");
      rb.final(args.is_final).window(args.window_start_ns, args.window_end_ns);
      const std::uint64_t full = dwarf_allocs_->full();
      rb.health(full ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "memalloc", full,
                full ? "sampled allocations without room in the site or live table "
                       "(max_sites, max_outstanding): counted in the totals only"
                     : "");
      rb.emit(*host_);
    }
  }

 private:
  // Keeps the symbolizer's view of every traced process current (re-read after an exec or
  // a dlopen), polled every 20 ms: the final report usually comes after a `loupe run --
  // cmd` child exited, when /proc/PID/maps is gone, and the symbolizer keeps what it read
  // while the process was alive.
  static constexpr int kWarmPerPass = 256;
  void warm_new_processes() {
    int fd = bpf_map__fd(skel_->maps.seen_pids);
    std::uint32_t key = 0, next = 0;
    std::uint32_t* prev = nullptr;
    // Bounded work per pass: system-wide runs may see thousands of processes.
    for (int n = 0; n < kWarmPerPass && bpf_map_get_next_key(fd, prev, &next) == 0; ++n) {
      frames_->warm(next);
      key = next;
      prev = &key;
    }
  }
  void start_warmer() {
    warmer_ = std::thread([this] {
      sdk::name_this_thread("memalloc-warm");
      std::unique_lock lock(warm_mu_);
      while (!warm_stop_) {
        warm_cv_.wait_for(lock, std::chrono::milliseconds(20));
        if (warm_stop_) break;
        warm_new_processes();
      }
    });
  }
  void stop_warmer() {
    {
      std::lock_guard lock(warm_mu_);
      warm_stop_ = true;
    }
    warm_cv_.notify_all();
    if (warmer_.joinable()) warmer_.join();
  }

  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<memalloc_bpf> skel_;
  int pid_ = 0;
  int uprobe_pid_ = -1;
  bool user_ = true, kernel_ = false, kernel_pages_ = false;
  std::string binary_;
  std::vector<std::string> functions_;
  SampleScaling scaling_ = SampleScaling::all();
  std::uint64_t sample_bytes_ = 0;
  ReporterOptions opts_;
  std::unique_ptr<StackFrames> frames_;
  std::unique_ptr<MemallocReporter> reporter_;
  std::unique_ptr<DwarfAllocs> dwarf_allocs_;
  bool dwarf_ = false;
  bool tables_ = false;
  std::thread warmer_;
  std::mutex warm_mu_;
  std::condition_variable warm_cv_;
  bool warm_stop_ = false;
};

}  // namespace loupe::memalloc

LOUPE_PROFILER(loupe::memalloc::MemallocProfiler, "memalloc", "0.1.0",
               "allocation stacks, bytes, size histogram and leaks (libc allocator via uprobes, "
               "kernel memory via kmem tracepoints)",
               loupe::memalloc::kKeys)
