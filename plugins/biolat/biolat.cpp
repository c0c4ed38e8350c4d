// SPDX-License-Identifier: Apache-2.0
//
// biolat: block I/O latency (queue, service, total), request size, sequential share,
// errors and a bounded per-process breakdown per device and operation, from the block
// request tracepoints; requests above a threshold leave the kernel as events.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <iterator>
#include <map>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "bio_labels.hpp"
#include "biolat.h"
#include "biolat.skel.h"
#include "biolat_reporter.hpp"
#include "device_names.hpp"
#include "loupe/sdk/flavour.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "outlier_decoder.hpp"
#include "rq_prototype.hpp"

namespace loupe::biolat {
namespace {

constexpr loupe_config_key kOwnKeys[] = {
    {"device", LOUPE_CFG_STRING, 0, "\"\"",
     "only this disk: a name (vda, /dev/nvme0n1) or major:minor (\"\" = every device)"},
    {"all_processes", LOUPE_CFG_BOOL, 0, "false",
     "trace every process even when the session has a target process"},
    {"min_latency_ns", LOUPE_CFG_INT, 0, "0",
     "ignore requests whose total latency is below this (counted)", 0, INT64_MAX},
    {"outlier_ns", LOUPE_CFG_INT, 0, "0",
     "send requests at least this slow (total) as slow_request events (0 = off)", 0, INT64_MAX},
    {"per_process", LOUPE_CFG_BOOL, 0, "true",
     "per-process (pid, comm) request counts, bytes and latency per device and op"},
    {"process_limit", LOUPE_CFG_INT, 0, "256",
     "most (device, op, pid, comm) entries kept; the rest is counted", 1, 65536},
    {"max_in_flight", LOUPE_CFG_INT, 0, "10240", "size of the in-flight request map", 64, 4194304},
    {"max_device_ops", LOUPE_CFG_INT, 0, "512",
     "most (device, op) pairs kept, each with its sync and async rows; requests of the rest are "
     "counted (stats_full)",
     1, 65536},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kMechanismKey, sdk::kPidKey);

// The request's life, then the merges: I/O that joins a request already queued is never
// issued or completed on its own, and is counted where it joined.
constexpr const char* kHooks[] = {"block_rq_insert", "block_rq_issue",      "block_rq_complete",
                                  "block_rq_merge",  "block_bio_backmerge", "block_bio_frontmerge"};
constexpr std::size_t kHookCount = std::size(kHooks);

}  // namespace

class BiolatProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;

    // pid: only requests this process started.
    sdk::TargetFilter filter = sdk::read_target_filter(cfg, args.session);
    if (cfg.value_bool("all_processes") && cfg.value_int("pid") == 0) filter.pid = 0;

    std::uint32_t dev = 0;
    std::string device = cfg.value_string("device");
    if (!device.empty()) {
      try {
        dev = DeviceNames().resolve(device);
      } catch (const std::invalid_argument& e) {
        throw sdk::Error(LOUPE_ERR_INVALID_ARG, e.what());
      }
    }
    // BIO_MECH_* follow sdk::kTpBtf, kRawTp, kTracepoint.
    mechanism_ = sdk::choose_flavour(*host_, cfg.value_string("mechanism"), "block",
                                     {kHooks[0], kHooks[1], kHooks[2]});

    bool single_arg = true;
    int bio_arg = 0;
    if (mechanism_ != BIO_MECH_TRACEPOINT) {
      auto arg_of = [&](const char* tp, const char* type) {
        std::string why;
        auto arg = tracepoint_pointer_arg(tp, type, &why);
        if (!arg)
          throw sdk::Error(LOUPE_ERR_UNSUPPORTED, std::string("cannot read the ") + tp +
                                                      " prototype for " +
                                                      mechanism_name(mechanism_) + ": " + why);
        return *arg;
      };
      single_arg = arg_of("block_rq_issue", "request") == 0;
      bio_arg = arg_of("block_bio_backmerge", "bio");
    }

    skel_.reset(biolat_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    auto* ro = skel_->rodata;
    ro->targ_dev = dev;
    ro->targ_min_ns = static_cast<std::uint64_t>(cfg.value_int("min_latency_ns"));
    ro->targ_outlier_ns = static_cast<std::uint64_t>(cfg.value_int("outlier_ns"));
    ro->targ_per_process = cfg.value_bool("per_process");
    ro->targ_rq_single_arg = single_arg;
    ro->targ_bio_arg = static_cast<std::uint32_t>(bio_arg);
    sdk::write_target_filter(filter, skel_.get());
    per_process_ = ro->targ_per_process;
    outliers_on_ = ro->targ_outlier_ns != 0;

    const auto& p = skel_->progs;
    bpf_program* progs[3][kHookCount] = {
        {p.bio_btf_insert, p.bio_btf_issue, p.bio_btf_complete, p.bio_btf_rq_merge,
         p.bio_btf_backmerge, p.bio_btf_frontmerge},
        {p.bio_raw_insert, p.bio_raw_issue, p.bio_raw_complete, p.bio_raw_rq_merge,
         p.bio_raw_backmerge, p.bio_raw_frontmerge},
        {p.bio_tp_insert, p.bio_tp_issue, p.bio_tp_complete, p.bio_tp_rq_merge, p.bio_tp_backmerge,
         p.bio_tp_frontmerge}};
    for (std::uint32_t m = 0; m < 3; ++m)
      for (std::size_t h = 0; h < kHookCount; ++h)
        bpf_program__set_autoload(progs[m][h], m == mechanism_);
    for (std::size_t h = 0; h < kHookCount; ++h) chosen_[h] = progs[mechanism_][h];
    // The classic bio tracepoints name a partition: the BPF side maps it to its disk.
    if (mechanism_ == BIO_MECH_TRACEPOINT) partition_disks_ = DeviceNames().partition_disks();
    bpf_map__set_max_entries(
        skel_->maps.disk_of,
        std::max<std::uint32_t>(1, static_cast<std::uint32_t>(partition_disks_.size())));

    // The classic tracepoints key requests by (dev, sector) in a map of their own.
    const bool by_sector = mechanism_ == BIO_MECH_TRACEPOINT;
    bpf_map__set_max_entries(by_sector ? skel_->maps.starts_tp : skel_->maps.starts,
                             static_cast<std::uint32_t>(cfg.value_int("max_in_flight")));
    bpf_map__set_max_entries(by_sector ? skel_->maps.starts : skel_->maps.starts_tp, 1);
    // Rows by slot (loupe/map.bpf.h): each bound sizes the rows, their names and the claims.
    const auto process_limit = static_cast<std::uint32_t>(cfg.value_int("process_limit"));
    skel_->rodata->targ_process_limit = process_limit;
    for (bpf_map* m : {skel_->maps.procs, skel_->maps.proc_slots, skel_->maps.proc_slots_taken})
      bpf_map__set_max_entries(m, process_limit);
    const auto device_ops = static_cast<std::uint32_t>(cfg.value_int("max_device_ops"));
    skel_->rodata->targ_device_ops = device_ops;
    bpf_map__set_max_entries(skel_->maps.dev_ops, device_ops);
    bpf_map__set_max_entries(skel_->maps.dev_slots_taken, device_ops);
    bpf_map__set_max_entries(skel_->maps.stats, 2 * device_ops);
    host_->debug(std::string("biolat: mechanism=") + mechanism_name(mechanism_) +
                 " rq_single_arg=" + (single_arg ? "true" : "false") +
                 " pid=" + std::to_string(filter.pid) +
                 " dev=" + (dev ? dev_string(dev) : std::string("all")));
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the biolat BPF object: " + host_->last_error());
    for (const auto& [part, disk] : partition_disks_)
      if (bpf_map_update_elem(bpf_map__fd(skel_->maps.disk_of), &part, &disk, BPF_ANY) != 0)
        throw sdk::Error(LOUPE_ERR_KERNEL,
                         "filling the partition map: " + std::string(std::strerror(errno)));
    for (std::size_t h = 0; h < kHookCount; ++h)
      if (host_->bpf_attach(chosen_[h], kHooks[h]) != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL,
                         std::string("attaching ") + kHooks[h] + ": " + host_->last_error());
    std::string mech = mechanism_name(mechanism_);
    if (outliers_on_) {
      decoder_ = std::make_unique<OutlierDecoder>(*host_, mech);
      sdk::register_fixed_ring<bio_outlier_event>(
          *host_,
          {"slow_requests", bpf_map__fd(skel_->maps.outliers), BIO_RECORD_OUTLIER,
           BIO_RECORD_OUTLIER_VERSION, LOUPE_RING_MUST_KEEP, bpf_map__fd(skel_->maps.outliers_lost),
           bpf_map__fd(skel_->maps.outliers_divisor)},
          decoder_.get());
    }
    ReporterMaps maps;
    maps.dev_ops_fd = bpf_map__fd(skel_->maps.dev_ops);
    maps.stats_fd = bpf_map__fd(skel_->maps.stats);
    maps.proc_slots_fd = per_process_ ? bpf_map__fd(skel_->maps.proc_slots) : -1;
    maps.procs_fd = bpf_map__fd(skel_->maps.procs);
    maps.counters_fd = bpf_map__fd(skel_->maps.counters);
    maps.starts_fd =
        bpf_map__fd(mechanism_ == BIO_MECH_TRACEPOINT ? skel_->maps.starts_tp : skel_->maps.starts);
    reporter_ = std::make_unique<BiolatReporter>(*host_, maps, mech);
  }

  void collect(const sdk::CollectArgs& args) override {
    if (reporter_) reporter_->collect(args.is_final, args.window_start_ns, args.window_end_ns);
  }

 private:
  std::unique_ptr<sdk::Host> host_;
  sdk::Skeleton<biolat_bpf> skel_;
  std::uint32_t mechanism_ = BIO_MECH_TP_BTF;
  bpf_program* chosen_[kHookCount] = {};
  std::map<std::uint32_t, std::uint32_t> partition_disks_;  // classic flavour only
  bool per_process_ = true;
  bool outliers_on_ = false;
  std::unique_ptr<OutlierDecoder> decoder_;
  std::unique_ptr<BiolatReporter> reporter_;
};

}  // namespace loupe::biolat

LOUPE_PROFILER(loupe::biolat::BiolatProfiler, "biolat", "0.1.0",
               "block I/O latency, size, pattern and attribution per device and operation",
               loupe::biolat::kKeys)
