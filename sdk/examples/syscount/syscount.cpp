// SPDX-License-Identifier: Apache-2.0
//
// syscount: how many times each syscall was entered, optionally per process. The SDK's
// example plugin: counting happens in the kernel (a per-CPU array by syscall number, or a
// per-CPU hash per process), user space only merges the CPUs and emits one counter record
// per syscall at each collect(). The hook is the
// cheapest flavour of raw_syscalls:sys_enter the kernel has (sdk/flavour.hpp): tp_btf or
// raw_tp take the syscall number as it is, the classic tracepoint after a record copy.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loupe/sdk.hpp"
#include "loupe/sdk/flavour.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "syscall_names.hpp"
#include "syscount.h"
#include "syscount.skel.h"

namespace {

using loupe::sdk::Error;

// The hook each flavour attaches to, as a link's label says it.
constexpr const char* kHookNames[] = {"sys_enter", "sys_enter", "raw_syscalls:sys_enter"};

constexpr loupe_config_key kOwnKeys[] = {
    {.name = "per_process",
     .type = LOUPE_CFG_BOOL,
     .default_value = "false",
     .help = "break the counts down per process (adds pid and comm labels)"},
    {.name = "top",
     .type = LOUPE_CFG_INT,
     .default_value = "20",
     .help = "emit only the N most frequent syscalls (0 = all); the total covers all",
     .min_int = 0,
     .max_int = SYSCOUNT_MAX_ENTRIES},
};
// The pid, tid, comm and cgroup filters of loupe/filter.bpf.h, declared by the SDK.
constexpr auto kKeys =
    loupe::sdk::concat_keys(kOwnKeys, loupe::sdk::kMechanismKey, loupe::sdk::kTargetFilterKeys);

struct Row {
  syscount_key key;
  std::uint64_t count = 0;
  std::string comm;
};

class SyscountProfiler : public loupe::sdk::Profiler {
 public:
  void setup(const loupe::sdk::SetupArgs& args) override {
    host_.emplace(args.host);
    per_process_ = args.config.value_bool("per_process");
    top_ = static_cast<std::size_t>(args.config.value_int("top"));
    // Probed before loading, so a kernel without any flavour (or a classic tracepoint
    // without tracefs) is said as such rather than as an attach failure after the verifier.
    mechanism_ = loupe::sdk::choose_flavour(*host_, args.config.value_string("mechanism"),
                                            "raw_syscalls", {"sys_enter"});

    skel_.reset(syscount_bpf__open());
    if (!skel_)
      throw Error(LOUPE_ERR_RESOURCE, std::string("open BPF object: ") + std::strerror(errno));
    // pid (default: the session's target), tid, comm, cgroup -> the loupe_filter_* knobs.
    const auto filter = loupe::sdk::apply_target_filter(args.config, args.session, skel_.get());
    skel_->rodata->targ_per_process = per_process_;
    bpf_program* progs[] = {skel_->progs.syscount_sys_enter_btf,
                            skel_->progs.syscount_sys_enter_raw, skel_->progs.syscount_sys_enter};
    for (std::uint32_t m = 0; m < std::size(progs); ++m)
      bpf_program__set_autoload(progs[m], m == mechanism_);
    prog_ = progs[mechanism_];
    host_->debug(std::string("syscount: mechanism=") + loupe::sdk::kFlavourNames[mechanism_] +
                 " pid=" + std::to_string(filter.pid) +
                 " per_process=" + (per_process_ ? "true" : "false"));
  }

  void start(const loupe::sdk::StartArgs&) override {
    if (int rc = host_->bpf_load(skel_->obj); rc != LOUPE_OK)
      throw Error(static_cast<loupe_status>(rc), host_->last_error());
    if (int rc = host_->bpf_attach(prog_, kHookNames[mechanism_]); rc != LOUPE_OK)
      throw Error(static_cast<loupe_status>(rc), host_->last_error());
  }

  // Counts since the session began (the map is never cleared): every record's window
  // starts at the session's start, in interval reports too.
  void collect(const loupe::sdk::CollectArgs& args) override {
    std::vector<Row> rows = read_counts();
    std::uint64_t total = 0;
    for (const Row& r : rows) total += r.count;

    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      if (a.count != b.count) return a.count > b.count;
      if (a.key.tgid != b.key.tgid) return a.key.tgid < b.key.tgid;
      return a.key.nr < b.key.nr;
    });
    if (top_ != 0 && rows.size() > top_) rows.resize(top_);

    for (const Row& r : rows) {
      loupe::sdk::RecordBuilder rec(LOUPE_RECORD_METRIC, "syscalls");
      rec.label("syscall", syscount::syscall_name(r.key.nr)).label("nr", std::to_string(r.key.nr));
      if (per_process_) rec.label("pid", std::to_string(r.key.tgid)).label("comm", r.comm);
      emit(rec.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(r.count)), args);
    }
    loupe::sdk::RecordBuilder sum(LOUPE_RECORD_METRIC, "all_syscalls");
    emit(sum.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(total)), args);

    std::uint64_t dropped = read_dropped();
    loupe::sdk::RecordBuilder health(LOUPE_RECORD_HEALTH, "dropped_map_full");
    health.health(dropped ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "counts", dropped,
                  dropped ? "syscalls not counted: the counts map was full" : "");
    emit(health, args);
  }

 private:
  void emit(loupe::sdk::RecordBuilder& rec, const loupe::sdk::CollectArgs& args) const {
    rec.final(args.is_final).window(args.session_start_ns, args.window_end_ns).emit(*host_);
  }

  std::vector<Row> read_counts() const {
    const int fd = bpf_map__fd(skel_->maps.counts);
    const int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) throw Error(LOUPE_ERR_INTERNAL, "cannot read the number of possible CPUs");
    std::vector<syscount_val> slots(static_cast<std::size_t>(ncpu));
    std::vector<Row> rows;
    syscount_key key{};
    syscount_key next{};
    const syscount_key* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
      key = next;
      prev = &key;
      if (bpf_map_lookup_elem(fd, &key, slots.data()) != 0) continue;  // deleted meanwhile
      Row row{key, 0, {}};
      for (const syscount_val& v : slots) {
        row.count += v.count;
        if (row.comm.empty() && v.comm[0] != '\0')
          row.comm.assign(v.comm, strnlen(v.comm, sizeof(v.comm)));
      }
      rows.push_back(std::move(row));
    }
    // The array: every slot in one batch (one system call, not one per syscall number).
    const int arr = bpf_map__fd(skel_->maps.by_nr);
    std::vector<std::uint32_t> keys(SYSCOUNT_ARRAY_NR);
    std::vector<std::uint64_t> values(SYSCOUNT_ARRAY_NR * static_cast<std::size_t>(ncpu));
    std::uint32_t out_batch = 0, count = SYSCOUNT_ARRAY_NR;
    int rc =
        bpf_map_lookup_batch(arr, nullptr, &out_batch, keys.data(), values.data(), &count, nullptr);
    if (rc != 0 && errno != ENOENT)  // ENOENT: the last batch, `count` holds it
      throw Error(LOUPE_ERR_KERNEL, std::string("reading the counts: ") + std::strerror(errno));
    for (std::uint32_t i = 0; i < count; ++i) {
      std::uint64_t n = 0;
      for (int c = 0; c < ncpu; ++c) n += values[i * static_cast<std::size_t>(ncpu) + c];
      if (n) rows.push_back(Row{syscount_key{0, keys[i]}, n, {}});
    }
    return rows;
  }

  std::uint64_t read_dropped() const {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<std::uint64_t> slots(static_cast<std::size_t>(std::max(ncpu, 1)));
    std::uint32_t zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.dropped), &zero, slots.data()) != 0) return 0;
    std::uint64_t n = 0;
    for (std::uint64_t v : slots) n += v;
    return n;
  }

  std::optional<loupe::sdk::Host> host_;
  loupe::sdk::Skeleton<syscount_bpf> skel_;
  bool per_process_ = false;
  std::size_t top_ = 20;
  std::uint32_t mechanism_ = loupe::sdk::kTpBtf;
  bpf_program* prog_ = nullptr;
};

}  // namespace

LOUPE_PROFILER(SyscountProfiler, "syscount", "1.0.0",
               "per-syscall counts (optionally per process) from raw_syscalls:sys_enter", kKeys)
