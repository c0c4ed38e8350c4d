// SPDX-License-Identifier: Apache-2.0
//
// Loading BPF objects with verifier-log capture, and the links the session owns.
#ifndef LOUPE_KERNEL_BPF_LIFECYCLE_HPP
#define LOUPE_KERNEL_BPF_LIFECYCLE_HPP

#include <mutex>
#include <string>
#include <vector>

#include "kernel/probe_stats.hpp"
#include "util/result.hpp"

struct bpf_object;
struct bpf_program;
struct bpf_link;

namespace loupe {

// Loads `obj`; the error names the failing program with the useful tail of its verifier log.
Status load_with_verifier_log(bpf_object* obj, std::size_t tail_lines = 25);

// Routes libbpf's own messages into spdlog once per process.
void install_libbpf_logging();

struct ProbeResult {
  std::string instance;  // plugin instance
  std::string probe;     // label given by the plugin
  std::string program;
  bool attached = false;
  std::string error;
};

// Links attached for the session; destroyed (detached) all at once, in attach order.
class LinkSet {
 public:
  ~LinkSet() { detach_all(); }
  // `target`: what the plugin says the link is attached to; used when the kernel's link info
  // names nothing (perf-event links before 6.6), before any guess from the label.
  void add(const std::string& instance, const std::string& probe, bpf_program* prog, bpf_link* link,
           int err, const std::string& target = {});
  void detach_all();
  std::vector<ProbeResult> results() const;
  std::size_t attached_count(const std::string& instance) const;
  // Run counts and time per attached probe (meaningful while ProbeStats is enabled).
  std::vector<ProgramStats> program_stats() const;

 private:
  mutable std::mutex mu_;
  std::vector<bpf_link*> links_;
  struct Attached {
    std::string instance, probe, program, target;
    int prog_fd;  // dup of the program's fd: stats stay readable until detach_all()
  };
  std::vector<Attached> attached_;
  std::vector<ProbeResult> results_;
};

}  // namespace loupe

#endif  // LOUPE_KERNEL_BPF_LIFECYCLE_HPP
