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
#include "loupe/sdk/target_filter.hpp"

namespace loupe::fileio {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"regular_only", LOUPE_CFG_BOOL, 0, "true",
     "regular files only (false: sockets, pipes and ttys too, by inode)"},
    {"max_files", LOUPE_CFG_INT, 0, "8192", "files with a row of their own; more are counted", 64,
     1048576},
    {"top", LOUPE_CFG_INT, 0, "20", "files ranked by bytes and by time in each report", 1, 100000},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kTargetFilterKeys);

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
    reporter_ = std::make_unique<FileioReporter>(
        *host_,
        ReporterMaps{bpf_map__fd(skel_->maps.stats), bpf_map__fd(skel_->maps.paths),
                     bpf_map__fd(skel_->maps.counters)},
        top_);
  }

  void collect(const sdk::CollectArgs& args) override {
    if (reporter_) reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
  }

 private:
  std::unique_ptr<sdk::Host> host_;
  std::unique_ptr<fileio_bpf, SkelDeleter> skel_;
  std::size_t top_ = 20;
  std::unique_ptr<FileioReporter> reporter_;
};

}  // namespace loupe::fileio

LOUPE_PROFILER(loupe::fileio::FileioProfiler, "fileio", "0.1.0",
               "file I/O per file and operation: count, bytes, errors, latency, by path",
               loupe::fileio::kKeys)
