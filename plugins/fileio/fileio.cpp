// SPDX-License-Identifier: Apache-2.0
//
// fileio: the target's file I/O per file and operation (open, read, write, fsync, fstat,
// close and their vector/positional variants): count, bytes, errors and latency, each
// file named by its path as the kernel spells it at the call.
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "fileio.h"
#include "fileio.skel.h"
#include "fileio_reporter.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "loupe/sdk/ustack.hpp"
#include "slow_decoder.hpp"

namespace loupe::fileio {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"regular_only", LOUPE_CFG_BOOL, 0, "true",
     "regular files only (false: sockets, pipes and ttys too, by inode)"},
    {"max_files", LOUPE_CFG_INT, 0, "8192", "files with a row of their own; more are counted", 64,
     1048576},
    {"top", LOUPE_CFG_INT, 0, "20", "files ranked by bytes and by time in each report", 1, 100000},
    {"slow_us", LOUPE_CFG_INT, 0, "10000",
     "operations at or above this many microseconds are events with their file, position, "
     "size and user stack (fileslower); 0 = none",
     0, 3600000000LL},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kUstackKeys, sdk::kTargetFilterKeys);

struct SkelDeleter {
  void operator()(fileio_bpf* s) const { fileio_bpf__destroy(s); }
};

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
    top_ = static_cast<std::size_t>(cfg.value_int("top"));
    const auto slow_us = static_cast<std::uint64_t>(cfg.value_int("slow_us"));
    skel_->rodata->targ_slow_ns = slow_us * 1000;
    slow_on_ = slow_us != 0;
    dwarf_ = slow_on_ && cfg.value_string("unwind") == "dwarf";
    if (dwarf_ && !host_->can_unwind_user())
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                       "unwind = \"dwarf\" needs a host with the unwind_user service (ABI 1.2)");
    skel_->rodata->targ_slow_dwarf = dwarf_;
    skel_->rodata->loupe_ustack_stack_bytes =
        dwarf_ ? static_cast<std::uint32_t>(cfg.value_int("stack_bytes")) : 0;
    if (!slow_on_) bpf_map__set_max_entries(skel_->maps.slow, 4096);
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the fileio BPF object: " + host_->last_error());
    for (const auto& [prog, hook] :
         {std::pair<bpf_program*, const char*>{skel_->progs.fio_enter, "raw_syscalls:sys_enter"},
          {skel_->progs.fio_exit, "raw_syscalls:sys_exit"}})
      if (host_->bpf_attach(prog, hook) != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL,
                         std::string("attaching ") + hook + ": " + host_->last_error());
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
    reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
    if (dwarf_ && slow_)
      slow_->unwinder().emit_health("fileio", bpf_map__fd(skel_->maps.loupe_ustack_stats),
                                    args.is_final, args.window_start_ns, args.window_end_ns);
  }

 private:
  std::unique_ptr<sdk::Host> host_;
  std::unique_ptr<fileio_bpf, SkelDeleter> skel_;
  std::size_t top_ = 20;
  bool slow_on_ = false;
  bool dwarf_ = false;
  std::unique_ptr<SlowDecoder> slow_;
  std::unique_ptr<FileioReporter> reporter_;
};

}  // namespace loupe::fileio

LOUPE_PROFILER(loupe::fileio::FileioProfiler, "fileio", "0.2.0",
               "file I/O per file and operation: count, bytes, errors, latency, by path",
               loupe::fileio::kKeys)
