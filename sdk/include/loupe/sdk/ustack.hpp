// SPDX-License-Identifier: Apache-2.0
//
// User stacks copied by bpf/include/loupe/ustack.bpf.h, unwound through the host
// (loupe_host_services.unwind_user, ABI 1.2), with the losses of both sides counted in
// one place so every stack-taking plugin reports them the same way.
//
//   sdk::UstackUnwinder unwinder(host);
//   // in decode(): r is the record, r->us its copy, the stack bytes follow it
//   auto st = unwinder.unwind(r->tgid, r->us, len - sizeof(*r), addrs);
//   // at collect(): unwinder.emit_health(...), with the BPF side's loupe_ustack_stats
#ifndef LOUPE_SDK_USTACK_HPP
#define LOUPE_SDK_USTACK_HPP

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "loupe/sdk/host.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/unwind.hpp"
#include "loupe/ustack.h"

namespace loupe::sdk {

// The keys every stack-taking plugin offers for the choice (same names, ranges and docs
// everywhere): sdk::concat_keys(own, sdk::kUstackKeys, ...).
inline constexpr const char* kUnwindChoices[] = {"tables", "fp", "dwarf", nullptr};
inline constexpr loupe_config_key kUstackKeys[] = {
    {"unwind", LOUPE_CFG_STRING, 0, "\"tables\"",
     "user stacks by loupe's in-kernel unwinder with tables from each file's .eh_frame "
     "(tables: right with or without frame pointers, keeps the caller of a libc call), by "
     "the kernel's frame-pointer walk (fp: cheaper, right only for code built with frame "
     "pointers), or from a stack copy unwound in user space (dwarf: costs a copy per stack)",
     0, 0, nullptr, 0, 0, kUnwindChoices},
    kUnwindRowsKey,
    kPythonFramesKey,
    // 16 KiB, the largest slice: a copy stops at the top of the stack, so a bigger slice
    // costs only the stacks that need it. Measured on Debian's `sort -V` (cpusample, 99 Hz):
    // 8 KiB cut 72-91 of 82-99 stacks, 16 KiB 0-12, for 2.6-2.8 -> 2.9-3.8 us a sample.
    {"stack_bytes", LOUPE_CFG_INT, 0, "16384",
     "unwind = \"dwarf\": bytes of user stack copied per stack (deeper stacks are cut, "
     "and counted in <plugin>/unwind_stack_exhausted)",
     512, LOUPE_USTACK_MAX_BYTES},
};

// The names health records and docs use for each loupe_unwind_status.
inline const char* unwind_status_name(std::uint32_t s) {
  switch (s) {
    case LOUPE_UNWIND_OK: return "ok";
    case LOUPE_UNWIND_NO_CFI: return "no_cfi";
    case LOUPE_UNWIND_STACK_EXHAUSTED: return "stack_exhausted";
    case LOUPE_UNWIND_BAD_MEMORY: return "bad_memory";
    case LOUPE_UNWIND_UNMAPPED_PC: return "unmapped_pc";
    case LOUPE_UNWIND_MAX_DEPTH: return "max_depth";
    case LOUPE_UNWIND_NO_PROCESS: return "no_process";
    case LOUPE_UNWIND_UNSUPPORTED: return "unsupported";
    default: return "unknown";
  }
}

inline const char* unwind_status_help(std::uint32_t s) {
  switch (s) {
    case LOUPE_UNWIND_NO_CFI: return "user stacks cut short: no CFI (.eh_frame) for a frame's pc";
    case LOUPE_UNWIND_STACK_EXHAUSTED:
      return "user stacks cut short: deeper than the copied slice (raise stack_bytes, at most "
             "16384; or unwind = \"fp\" for code built with frame pointers)";
    case LOUPE_UNWIND_BAD_MEMORY:
      return "user stacks cut short: the unwinder left the copied slice (garbage registers)";
    case LOUPE_UNWIND_UNMAPPED_PC:
      return "user stacks cut short: a pc outside every known mapping (JIT code, vdso, gone)";
    case LOUPE_UNWIND_MAX_DEPTH: return "user stacks cut at the depth limit (lost their root)";
    case LOUPE_UNWIND_NO_PROCESS:
      return "user stacks not unwound: the process's mappings could not be read";
    case LOUPE_UNWIND_UNSUPPORTED:
      return "user stacks not unwound: the host cannot unwind (architecture, build, ABI)";
    default: return "user stacks unwound to their outermost frame";
  }
}

// loupe_ustack (BPF) to loupe_user_regs (host ABI).
inline loupe_user_regs to_user_regs(const loupe_ustack& us) {
  loupe_user_regs regs{};
  regs.size = sizeof(regs);
  regs.arch = LOUPE_ARCH_X86_64;
  for (int i = 0; i < LOUPE_USTACK_NREGS; ++i) regs.regs[i] = us.regs[i];
  regs.mask = (std::uint64_t{1} << LOUPE_USTACK_NREGS) - 1;
  return regs;
}

// Unwinds copies through the host and counts the outcome of each. Thread-safe counters;
// unwind() may be called from the ring worker while emit_health() runs on the session
// thread.
class UstackUnwinder {
 public:
  explicit UstackUnwinder(const Host& host, std::uint32_t max_depth = 127)
      : host_(host), max_depth_(max_depth) {}

  // `stack` holds `stack_len` bytes copied from us.regs[SP] (the bytes after the record's
  // loupe_ustack). `out` gets the pc and the return addresses, leaf first.
  loupe_unwind_status unwind(std::uint32_t pid, const loupe_ustack& us, const void* stack,
                             std::uint32_t stack_len, std::vector<std::uint64_t>& out) {
    loupe_user_regs regs = to_user_regs(us);
    if (stack_len > us.stack_len) stack_len = us.stack_len;
    loupe_unwind_status st = host_.unwind_user(pid, regs, stack, stack_len, out, max_depth_);
    counts_[st < LOUPE_UNWIND_STATUS_COUNT ? st : LOUPE_UNWIND_UNSUPPORTED].fetch_add(
        1, std::memory_order_relaxed);
    return st;
  }

  std::uint64_t count(loupe_unwind_status s) const {
    return counts_[s].load(std::memory_order_relaxed);
  }

  // One health record per failure reason ("<component>/unwind_<reason>", WARN when
  // non-zero), the BPF side's copy counters, the number unwound whole (OK), and the
  // metric ustack_bytes_per_sample (mean stack bytes copied).
  void emit_health(const std::string& component, const loupe_ustack_counters& bpf, bool is_final,
                   std::uint64_t ws, std::uint64_t we) const {
    auto health = [&](const std::string& what, std::uint64_t v, bool loss, const char* msg) {
      RecordBuilder rb(LOUPE_RECORD_HEALTH, "stacks");
      rb.final(is_final).window(ws, we);
      rb.health(loss && v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, component + "/" + what, v, msg);
      rb.emit(host_);
    };
    health("unwind_ok", count(LOUPE_UNWIND_OK), false, unwind_status_help(LOUPE_UNWIND_OK));
    for (std::uint32_t s = 1; s < LOUPE_UNWIND_STATUS_COUNT; ++s)
      health(std::string("unwind_") + unwind_status_name(s),
             count(static_cast<loupe_unwind_status>(s)), true, unwind_status_help(s));
    health("ustack_copy_failed", bpf.copy_failed, true,
           "user stacks not copied: sp unmapped or its page not resident");
    health("ustack_no_regs", bpf.no_regs, false, "samples without user registers (kernel threads)");
    health("ustack_short_copy", bpf.short_copy, false,
           "stack copies shorter than stack_bytes (the top of the stack was reached first)");
    // What a sample costs the ring: the mean copy (sizes the ring and stack_bytes).
    RecordBuilder rb(LOUPE_RECORD_METRIC, "ustack_bytes_per_sample");
    rb.final(is_final).window(ws, we);
    rb.metric(
        LOUPE_METRIC_GAUGE, "bytes",
        bpf.captured ? static_cast<double>(bpf.bytes) / static_cast<double>(bpf.captured) : 0.0);
    rb.emit(host_);
  }

  // The same, with the BPF side's counters read from its loupe_ustack_stats map.
  void emit_health(const std::string& component, int ustack_stats_fd, bool is_final,
                   std::uint64_t ws, std::uint64_t we) const {
    std::uint32_t zero = 0;
    emit_health(component, read_per_cpu_sum<loupe_ustack_counters>(ustack_stats_fd, &zero),
                is_final, ws, we);
  }

 private:
  Host host_;
  std::uint32_t max_depth_;
  std::array<std::atomic<std::uint64_t>, LOUPE_UNWIND_STATUS_COUNT> counts_{};
};

// The ring of records that end with a loupe_ustack and its slice: from `min_len` (the
// smallest record on it, default a Record without slice) to a Record with the largest.
template <typename Record, typename Decoder>
void register_ustack_ring(const Host& host, const FixedRing& ring, Decoder* decoder,
                          std::uint32_t min_len = sizeof(Record)) {
  register_variable_ring(host, ring, min_len,
                         static_cast<std::uint32_t>(sizeof(Record)) + LOUPE_USTACK_MAX_BYTES,
                         decoder);
}

// Unwound stacks interned per process, under ids a kernel stack map never hands out
// (from 1 << 30): dwarf-mode rows then keep the fp mode's stack-id keys and reports.
// Thread-safe.
class StackInterner {
 public:
  static constexpr std::int32_t kFirstId = 1 << 30;

  // The id of `addrs` in process `tgid`, and whether it was new (then name it).
  std::pair<std::int32_t, bool> intern(std::uint32_t tgid,
                                       const std::vector<std::uint64_t>& addrs) {
    std::lock_guard lock(mu_);
    auto [it, inserted] = ids_.try_emplace({tgid, addrs}, next_);
    if (inserted) ++next_;
    return {it->second, inserted};
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::uint32_t, std::vector<std::uint64_t>>, std::int32_t> ids_;
  std::int32_t next_ = kFirstId;
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_USTACK_HPP
