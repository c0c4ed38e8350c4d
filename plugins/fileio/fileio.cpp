// SPDX-License-Identifier: Apache-2.0
//
// fileio: the target's file I/O per file and operation (open, read, write, fsync, fstat,
// close and their vector/positional variants): count, bytes, errors and latency, each
// file named by its path as the kernel spells it at the call.
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fileio.h"
#include "fileio.skel.h"
#include "fileio_reporter.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/unwind.hpp"
#include "loupe/sdk/ustack.hpp"
#include "slow_decoder.hpp"

namespace loupe::fileio {
namespace {

constexpr const char* kHookChoices[] = {"syscalls", "vfs", nullptr};

constexpr loupe_config_key kOwnKeys[] = {
    {"regular_only", LOUPE_CFG_BOOL, 0, "true",
     "regular files only (false: sockets, pipes and ttys too, by inode)"},
    {"max_files", LOUPE_CFG_INT, 0, "8192", "files with a row of their own; more are counted", 1,
     1048576},
    {"max_threads", LOUPE_CFG_INT, 0, "10240",
     "threads timed inside a file call at once; more are counted (fileio/inflight_full)", 64,
     4194304},
    {"top", LOUPE_CFG_INT, 0, "20", "files ranked by bytes and by time in each report", 1, 100000},
    {"hooks", LOUPE_CFG_STRING, 0, "\"syscalls\"",
     "where calls are seen: \"syscalls\" (raw_syscalls: every file syscall of the target, any "
     "kernel) or \"vfs\" (vfs_read, vfs_write, vfs_fsync_range by fentry, else kprobe: reads, "
     "writes and fsyncs only, kernel callers too, nothing run for other syscalls)",
     0, 0, nullptr, 0, 0, kHookChoices},
    {"slow_us", LOUPE_CFG_INT, 0, "10000",
     "operations at or above this many microseconds are events with their file, position, "
     "size and user stack (fileslower); 0 = none",
     0, 3600000000LL},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kUstackKeys, sdk::kTargetFilterKeys);

}  // namespace

class FileioProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
#if !defined(__x86_64__)
    throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "fileio knows x86_64's syscall numbers only");
#endif
    skel_.reset(fileio_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    skel_->rodata->targ_regular_only = cfg.value_bool("regular_only");
    sdk::apply_target_filter(cfg, args.session, skel_.get());
    const auto files = static_cast<std::uint32_t>(cfg.value_int("max_files"));
    bpf_map__set_max_entries(skel_->maps.paths, files);
    bpf_map__set_max_entries(skel_->maps.stats, files * 3);  // a few operations per file
    bpf_map__set_max_entries(skel_->maps.errnos, std::max(1U, files / 2));  // failures are rarer
    bpf_map__set_max_entries(skel_->maps.inflight,
                             static_cast<std::uint32_t>(cfg.value_int("max_threads")));
    top_ = static_cast<std::size_t>(cfg.value_int("top"));
    const auto slow_us = static_cast<std::uint64_t>(cfg.value_int("slow_us"));
    skel_->rodata->targ_slow_ns = slow_us * 1000;
    slow_on_ = slow_us != 0;
    dwarf_ = slow_on_ && cfg.value_string("unwind") == "dwarf";
    if (dwarf_ && !host_->can_unwind_user())
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "unwind = \"dwarf\" needs a host with the unwind_user service (ABI 1.2)");
    skel_->rodata->targ_slow_dwarf = dwarf_;
    // unwind = "tables" (the default): slow-event stacks by the in-kernel unwinder, copied
    // into the event (its stack store is not used).
    tables_ = slow_on_ && sdk::use_unwind_tables(cfg, *host_, "fileio");
    skel_->rodata->targ_slow_tables = tables_;
    sdk::size_unwind_maps(skel_.get(), args.host, tables_ ? sdk::unwind_rows(cfg, args.session) : 0,
                          1, sdk::python_frames(cfg));
    skel_->rodata->loupe_ustack_stack_bytes =
        dwarf_ ? static_cast<std::uint32_t>(cfg.value_int("stack_bytes")) : 0;
    if (!slow_on_) bpf_map__set_max_entries(skel_->maps.slow, 4096);
    choose_hooks(cfg.value_string("hooks"));
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the fileio BPF object: " + host_->last_error());
    if (tables_) sdk::attach_unwind_tables(*host_, skel_.get());
    for (const auto& [prog, hook] : hooks_)
      if (host_->bpf_attach(prog, hook) != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL, "attaching " + hook + ": " + host_->last_error());
    // One kretprobe program returns from all three functions.
    for (const char* fn : kretprobe_more_) {
      bpf_link* link = bpf_program__attach_kprobe(skel_->progs.fio_kretprobe, true, fn);
      const int err = link ? 0 : errno;
      const std::string probe = std::string("kretprobe:") + fn;
      host_->adopt_link(link, skel_->progs.fio_kretprobe, probe, err);
      if (!link)
        throw sdk::Error(LOUPE_ERR_KERNEL, "attaching " + probe + ": " + std::strerror(err));
    }
    if (slow_on_) {
      slow_ = std::make_unique<SlowDecoder>(*host_, bpf_map__fd(skel_->maps.paths));
      sdk::FixedRing ring{
          "slow",
          bpf_map__fd(skel_->maps.slow),
          dwarf_ ? std::uint16_t{FIO_RECORD_SLOW_DWARF} : std::uint16_t{FIO_RECORD_SLOW},
          dwarf_ ? std::uint16_t{FIO_RECORD_SLOW_DWARF_VERSION}
                 : std::uint16_t{FIO_RECORD_SLOW_VERSION},
          LOUPE_RING_MUST_KEEP,
          bpf_map__fd(skel_->maps.slow_lost),
          -1};
      if (dwarf_)
        sdk::register_ustack_ring<fio_slow_dwarf>(*host_, ring, slow_.get());
      else
        sdk::register_fixed_ring<fio_slow>(*host_, ring, slow_.get());
    }
    reporter_ = std::make_unique<FileioReporter>(
        *host_,
        ReporterMaps{bpf_map__fd(skel_->maps.stats), bpf_map__fd(skel_->maps.paths),
                     bpf_map__fd(skel_->maps.counters), bpf_map__fd(skel_->maps.errnos)},
        top_);
  }

  void collect(const sdk::CollectArgs& args) override {
    if (!reporter_) return;
    // The maps are never cleared: every record counts since the session began.
    reporter_->collect(args.is_final, args.session_start_ns, args.window_end_ns);
    if (dwarf_ && slow_)
      slow_->unwinder().emit_health("fileio", bpf_map__fd(skel_->maps.loupe_ustack_stats),
                                    args.is_final, args.window_start_ns, args.window_end_ns);
    if (tables_)
      sdk::emit_unwind_health(*host_, "fileio", bpf_map__fd(skel_->maps.loupe_unwind_stats),
                              args.is_final, args.window_start_ns, args.window_end_ns);
  }

 private:
  // Autoloads the programs of one way of seeing the calls; vfs: fentry/fexit where the
  // kernel allows them, else kprobe/kretprobe, else refused with both reasons.
  void choose_hooks(const std::string& wanted) {
    auto& p = skel_->progs;
    bpf_program* fentry[] = {p.fio_fentry_read, p.fio_fexit_read,   p.fio_fentry_write,
                             p.fio_fexit_write, p.fio_fentry_fsync, p.fio_fexit_fsync};
    bpf_program* kprobe[] = {p.fio_kprobe_read, p.fio_kprobe_write, p.fio_kprobe_fsync,
                             p.fio_kretprobe};
    for (bpf_program* prog : fentry) bpf_program__set_autoload(prog, false);
    for (bpf_program* prog : kprobe) bpf_program__set_autoload(prog, false);
    if (wanted == "syscalls") {
      hooks_ = {{p.fio_enter, "raw_syscalls:sys_enter"}, {p.fio_exit, "raw_syscalls:sys_exit"}};
      return;
    }
    bpf_program__set_autoload(p.fio_enter, false);
    bpf_program__set_autoload(p.fio_exit, false);
    std::string missing;
    for (const char* fn : {"vfs_read", "vfs_write", "vfs_fsync_range"})
      if (!host_->ksym_exists(fn)) missing += std::string(missing.empty() ? "" : ", ") + fn;
    if (!missing.empty())
      throw sdk::Error(LOUPE_ERR_NOT_FOUND, "hooks = \"vfs\": no " + missing + " in this kernel");
    std::string fentry_why, kprobe_why;
    if (host_->feature("fentry", &fentry_why) && host_->feature("fexit", &fentry_why)) {
      for (bpf_program* prog : fentry) bpf_program__set_autoload(prog, true);
      hooks_ = {{p.fio_fentry_read, "fentry:vfs_read"},
                {p.fio_fexit_read, "fexit:vfs_read"},
                {p.fio_fentry_write, "fentry:vfs_write"},
                {p.fio_fexit_write, "fexit:vfs_write"},
                {p.fio_fentry_fsync, "fentry:vfs_fsync_range"},
                {p.fio_fexit_fsync, "fexit:vfs_fsync_range"}};
      return;
    }
    if (host_->feature("kprobe", &kprobe_why) && host_->feature("kretprobe", &kprobe_why)) {
      for (bpf_program* prog : kprobe) bpf_program__set_autoload(prog, true);
      hooks_ = {{p.fio_kprobe_read, "kprobe:vfs_read"},
                {p.fio_kprobe_write, "kprobe:vfs_write"},
                {p.fio_kprobe_fsync, "kprobe:vfs_fsync_range"},
                {p.fio_kretprobe, "kretprobe:vfs_read"}};
      kretprobe_more_ = {"vfs_write", "vfs_fsync_range"};
      return;
    }
    throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "hooks = \"vfs\" needs fentry/fexit (" + fentry_why +
                                                ") or kprobes (" + kprobe_why +
                                                "); hooks = \"syscalls\" works on every kernel");
  }

  std::vector<std::pair<bpf_program*, std::string>> hooks_;
  std::vector<const char*> kretprobe_more_;
  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<fileio_bpf> skel_;
  std::size_t top_ = 20;
  bool slow_on_ = false;
  bool dwarf_ = false;
  bool tables_ = false;  // slow-event user stacks by the in-kernel unwinder
  std::unique_ptr<SlowDecoder> slow_;
  std::unique_ptr<FileioReporter> reporter_;
};

}  // namespace loupe::fileio

LOUPE_PROFILER(loupe::fileio::FileioProfiler, "fileio", "0.2.0",
               "file I/O per file and operation: count, bytes, errors, latency, by path",
               loupe::fileio::kKeys)
