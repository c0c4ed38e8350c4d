// SPDX-License-Identifier: Apache-2.0
//
// Decides, before anything is loaded, how each target will be traced on this kernel and
// checks that what it needs exists: the mechanism (fentry > kprobe for kernel functions,
// uprobe, tracepoint), the kernel symbol, the tracepoints, the binary and the symbol's
// file offset. Every refusal says why and what to do instead.
#ifndef LOUPE_LATENCY_TARGET_RESOLVER_HPP
#define LOUPE_LATENCY_TARGET_RESOLVER_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "library_resolver.hpp"
#include "loupe/sdk/host.hpp"
#include "probe_spec.hpp"

namespace loupe::latency {

enum class Mechanism { kFentry, kKprobe, kUprobe, kTracepoint, kUsdt };

const char* to_string(Mechanism m);

// A place a user probe sits: its offset in the probed file (what the BPF side keys its
// per-site counts by) and its name from the file's symbols, known before anything runs.
struct ProbeSite {
  std::uint64_t file_offset = 0;
  std::string name;  // "function+0xOFF", or "0xVADDR" when no symbol covers it
};

struct ResolvedTarget {
  TargetSpec spec;
  Mechanism mechanism = Mechanism::kTracepoint;
  std::string binary_path;          // kUprobe, kUsdt
  std::size_t usdt_sites = 0;       // kUsdt: sites of the entry (or only) probe
  std::uint64_t file_offset = 0;    // kUprobe
  std::vector<ProbeSite> sites;     // kUsdt: the entry (or only) probe's; kUprobe: the one
  bool binary_is_program = false;   // kUprobe, kUsdt: an executable, not a library
  int fentry_slot = -1;             // kFentry
  std::string probe_label() const;  // "uprobe:/lib/libc.so.6:malloc", "tracepoint:...", ...
};

class TargetResolver {
 public:
  // `target_pid` > 0: user-function libraries are looked up in that process's mappings first.
  TargetResolver(const sdk::Host& host, const LibraryResolver& libraries, int fentry_slots,
                 int target_pid = 0);

  // Throws sdk::Error (NOT_FOUND / UNSUPPORTED / INVALID_ARG) with the whole story.
  ResolvedTarget resolve(const TargetSpec& spec);

 private:
  ResolvedTarget resolve_kernel_function(const TargetSpec& spec);
  ResolvedTarget resolve_user_function(const TargetSpec& spec);
  ResolvedTarget resolve_tracepoints(const TargetSpec& spec);
  ResolvedTarget resolve_usdt(const TargetSpec& spec);
  void warn_incomplete_probes(const ResolvedTarget& t) const;

  const sdk::Host& host_;
  const LibraryResolver& libraries_;
  int fentry_slots_left_;
  int target_pid_;
  int next_fentry_slot_ = 0;
};

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_TARGET_RESOLVER_HPP
