// SPDX-License-Identifier: Apache-2.0
//
// Kernel preflight: what this kernel can do, probed (never inferred from a version number).
#ifndef LOUPE_FEATURES_HPP
#define LOUPE_FEATURES_HPP

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace loupe {

namespace detail {
class FeatureProbeContext;  // defined in features.cpp
}

struct FeatureResult {
  std::string name;  // "kprobe", "fentry", "tracepoint", ...
  std::string
      category;  // "syscall", "filesystem", "capability", "program", "attach", "map", "helper"
  bool available = false;
  bool forced_off = false;  // disabled by the user/test, not by the kernel
  std::string reason;       // why it works or precisely why not (errno text, missing file, ...)
};

// One entry of the feature table (features.cpp): what `loupe check` lists, in its order.
struct FeatureInfo {
  const char* name;
  const char* category;
  const char* description;
};

// What plugins and the core ask. Injectable: tests substitute a fixed set or force
// features off to exercise every fallback path on a kernel that has them all.
class FeatureSet {
 public:
  virtual ~FeatureSet() = default;
  // Unknown names return a result with available=false and reason "unknown feature".
  virtual FeatureResult get(const std::string& name) = 0;
  virtual std::vector<FeatureResult> all() = 0;
  bool available(const std::string& name) { return get(name).available; }
};

// Probes the running kernel lazily, once per feature (thread-safe cache). Probing may
// mount tracefs/bpffs when they are absent (say so in the reason).
class KernelFeatureProber : public FeatureSet {
 public:
  // `forced_off`: names reported unavailable with reason "disabled by --disable-feature"
  // (also read from the env var LOUPE_DISABLE_FEATURES, comma-separated).
  explicit KernelFeatureProber(std::set<std::string> forced_off = {});
  FeatureResult get(const std::string& name) override;
  std::vector<FeatureResult> all() override;
  // Every feature loupe knows (the table the preflight, --disable-feature and docs/cli.md
  // are made from).
  static const std::vector<FeatureInfo>& table();

 private:
  // Kernel facts several probes share (vmlinux BTF ids, tracefs path), gathered once.
  std::shared_ptr<detail::FeatureProbeContext> ctx_;
  std::mutex mu_;
  std::map<std::string, FeatureResult> cache_;
  std::set<std::string> forced_off_;
};

// Names the missing capability among CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN for a message.
std::vector<std::string> missing_capabilities();

// What ensuring a mount found or did, for messages that must say "mounted by loupe".
struct MountOutcome {
  std::string path;          // where the filesystem is mounted; "" on failure
  bool mounted_now = false;  // true when loupe mounted it during this call
  std::string error;         // why it is not available; "" on success
};
// Ensures tracefs is mounted (at /sys/kernel/tracing, or debugfs's tracing directory).
// Shared by the prober and by attach-target checks.
MountOutcome mount_tracefs();
// Ensures bpffs is mounted at /sys/fs/bpf.
MountOutcome mount_bpffs();

}  // namespace loupe

#endif  // LOUPE_FEATURES_HPP
