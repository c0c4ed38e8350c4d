// SPDX-License-Identifier: Apache-2.0
//
// "flood": a test-only profiler that emits ring records as fast as a getppid() loop lets
// it, so the dispatch tests can check the loss invariant on the real kernel, the
// backpressure policies and record/replay. Honours LOUPE_SESSION_REPLAY.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <time.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "flood.h"
#include "flood.skel.h"
#include "loupe/sdk.hpp"
#include "loupe/sdk/skeleton.hpp"

namespace {

using loupe::sdk::Error;

constexpr const char* kPolicies[] = {"drop", "coalesce", "count_only", nullptr};

constexpr loupe_config_key kKeys[] = {
    {.name = "ring_kb",
     .type = LOUPE_CFG_INT,
     .default_value = "64",
     .help = "ring size in KiB (power of 2)",
     .min_int = 4,
     .max_int = 1 << 20},
    {.name = "burst",
     .type = LOUPE_CFG_INT,
     .default_value = "16",
     .help = "records per getppid()",
     .min_int = 1,
     .max_int = FLOOD_MAX_BURST},
    {.name = "malformed_every",
     .type = LOUPE_CFG_INT,
     .default_value = "0",
     .help = "every Nth record carries a wrong version (0 = none)",
     .min_int = 0,
     .max_int = 1 << 30},
    {.name = "policy",
     .type = LOUPE_CFG_STRING,
     .default_value = "\"drop\"",
     .help = "queue-full policy",
     .choices = kPolicies},
    {.name = "decode_spin_ns",
     .type = LOUPE_CFG_INT,
     .default_value = "0",
     .help = "busy time per decoded record (a slow decoder)",
     .min_int = 0,
     .max_int = 1000000},
    {.name = "emit_events",
     .type = LOUPE_CFG_BOOL,
     .default_value = "false",
     .help = "emit one event record per ring record"},
    {.name = "feedback",
     .type = LOUPE_CFG_BOOL,
     .default_value = "true",
     .help = "let the core raise the in-kernel sampling divisor"},
};

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

class FloodProfiler : public loupe::sdk::Profiler {
 public:
  void setup(const loupe::sdk::SetupArgs& args) override {
    host_.emplace(args.host);
    replay_ = args.session && LOUPE_ABI_HAS_FIELD(args.session, loupe_session_info, flags) &&
              (args.session->flags & LOUPE_SESSION_REPLAY);
    std::string policy = args.config.get_string("policy", "");
    policy_ = policy == "drop"         ? LOUPE_BP_DROP_NEWEST
              : policy == "coalesce"   ? LOUPE_BP_COALESCE
              : policy == "count_only" ? LOUPE_BP_COUNT_ONLY
                                       : 0;
    if (!policy_)
      throw Error(LOUPE_ERR_INVALID_ARG,
                  "policy must be drop, coalesce or count_only, not " + policy);
    spin_ns_ = static_cast<std::uint64_t>(args.config.get_int("decode_spin_ns", 0));
    emit_events_ = args.config.get_bool("emit_events", false);
    feedback_ = args.config.get_bool("feedback", true);
    if (replay_) return;
    skel_.reset(flood_bpf__open());
    if (!skel_)
      throw Error(LOUPE_ERR_RESOURCE, std::string("open BPF object: ") + std::strerror(errno));
    skel_->rodata->targ_tgid = static_cast<__u32>(args.session ? args.session->target_pid : 0);
    skel_->rodata->targ_burst = static_cast<__u32>(args.config.get_int("burst", 16));
    skel_->rodata->targ_malformed_every =
        static_cast<__u32>(args.config.get_int("malformed_every", 0));
    const auto ring_bytes = static_cast<__u32>(args.config.get_int("ring_kb", 64)) * 1024u;
    bpf_map__set_max_entries(skel_->maps.flood_ring, ring_bytes);
    // A small ring wakes the reader at half full (emit.bpf.h).
    if (skel_->rodata->loupe_wakeup_bytes > ring_bytes / 2)
      skel_->rodata->loupe_wakeup_bytes = ring_bytes / 2;
  }

  void start(const loupe::sdk::StartArgs&) override {
    loupe_ring_spec spec{};
    spec.size = sizeof(spec);
    spec.map_fd = spec.lost_map_fd = spec.divisor_map_fd = -1;
    if (!replay_) {
      if (host_->bpf_load(skel_->obj) != LOUPE_OK)
        throw Error(LOUPE_ERR_KERNEL, host_->last_error());
      if (host_->bpf_attach(skel_->progs.flood_getppid, "sys_enter_getppid") != LOUPE_OK)
        throw Error(LOUPE_ERR_KERNEL, host_->last_error());
      spec.map_fd = bpf_map__fd(skel_->maps.flood_ring);
      spec.lost_map_fd = bpf_map__fd(skel_->maps.flood_ring_lost);
      spec.divisor_map_fd = feedback_ ? bpf_map__fd(skel_->maps.flood_ring_divisor) : -1;
    }
    spec.name = "flood";
    spec.record_type = FLOOD_RECORD_TYPE;
    spec.record_version = FLOOD_RECORD_VERSION;
    spec.min_len = spec.max_len = sizeof(flood_record);
    spec.category = LOUPE_RING_DROPPABLE_SAMPLE;
    spec.policy = policy_;
    spec.decode = &FloodProfiler::decode_thunk;
    spec.coalesce_key = &FloodProfiler::key_thunk;
    spec.user = this;
    if (host_->register_ring(spec) != LOUPE_OK)
      throw Error(LOUPE_ERR_INTERNAL, host_->last_error());
  }

  void collect(const loupe::sdk::CollectArgs& args) override {
    emit_counter("flood_decoded", static_cast<double>(decoded_.load()), args);
    if (replay_ || !skel_) return;
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<std::uint64_t> vals(static_cast<std::size_t>(ncpu));
    for (std::uint32_t slot : {FLOOD_ATTEMPTS, FLOOD_SAMPLED_OUT}) {
      std::uint64_t sum = 0;
      if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.flood_counts), &slot, vals.data()) == 0)
        for (auto v : vals) sum += v;
      emit_counter(slot == FLOOD_ATTEMPTS ? "flood_attempts" : "flood_sampled_out",
                   static_cast<double>(sum), args);
    }
  }

 private:
  void emit_counter(const char* name, double v, const loupe::sdk::CollectArgs& args) {
    loupe::sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.metric(LOUPE_METRIC_COUNTER, "records", v).final(args.is_final).emit(*host_);
  }

  static int decode_thunk(void* user, const void* data, std::uint32_t len) {
    return static_cast<FloodProfiler*>(user)->decode(data, len);
  }
  static std::uint64_t key_thunk(void*, const void* data, std::uint32_t) {
    flood_record r;
    std::memcpy(&r, data, sizeof(r));
    return r.key;
  }
  int decode(const void* data, std::uint32_t len) {
    if (len != sizeof(flood_record)) return LOUPE_ERR_INVALID_ARG;
    flood_record r;
    std::memcpy(&r, data, sizeof(r));
    if (spin_ns_) {
      std::uint64_t until = mono_ns() + spin_ns_;
      while (mono_ns() < until) {
      }
    }
    decoded_.fetch_add(1, std::memory_order_relaxed);
    if (emit_events_) {
      loupe::sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "flood_record");
      rb.field_u("seq", r.seq).field_u("key", r.key).field_u("tgid", r.tgid).event_time(1);
      rb.emit(*host_);
    }
    return LOUPE_OK;
  }

  std::optional<loupe::sdk::Host> host_;
  loupe::sdk::Skeleton<flood_bpf> skel_;
  bool replay_ = false, emit_events_ = false, feedback_ = true;
  std::uint32_t policy_ = LOUPE_BP_DROP_NEWEST;
  std::uint64_t spin_ns_ = 0;
  std::atomic<std::uint64_t> decoded_{0};
};

}  // namespace

LOUPE_PROFILER(FloodProfiler, "flood", "1.0.0", "test-only ring flood (getppid loop)", kKeys)
