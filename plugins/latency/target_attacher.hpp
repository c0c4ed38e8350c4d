// SPDX-License-Identifier: Apache-2.0
//
// Wires resolved targets to the generic programs of latency.bpf.c: before load it turns
// off the programs no target needs and binds fentry slots; after load it attaches one
// exit + entry pair per target with the target index as the attach cookie, and hands
// every link to the host.
#ifndef LOUPE_LATENCY_TARGET_ATTACHER_HPP
#define LOUPE_LATENCY_TARGET_ATTACHER_HPP

#include <vector>

#include "loupe/sdk/host.hpp"
#include "target_resolver.hpp"

struct latency_bpf;

namespace loupe::latency {

class TargetAttacher {
 public:
  TargetAttacher(const sdk::Host& host, latency_bpf* skel, int uprobe_pid);

  // Before load. Throws sdk::Error when a fentry target cannot be bound.
  void prepare(const std::vector<ResolvedTarget>& targets);
  // After load. Throws sdk::Error naming the target and the kernel's errno.
  void attach(const std::vector<ResolvedTarget>& targets);
  // One target; `index` is its cookie (its position in the target list).
  void attach_one(const ResolvedTarget& t, unsigned index);

 private:
  sdk::Host host_;
  latency_bpf* skel_;
  int uprobe_pid_;  // -1 = every process
};

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_TARGET_ATTACHER_HPP
