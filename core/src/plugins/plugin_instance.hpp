// SPDX-License-Identifier: Apache-2.0
//
// One live instance of a plugin: calls its hooks with argument structs and turns failures
// into HookError text naming the plugin and the hook. Knows nothing of what the plugin does.
#ifndef LOUPE_PLUGINS_PLUGIN_INSTANCE_HPP
#define LOUPE_PLUGINS_PLUGIN_INSTANCE_HPP

#include <memory>
#include <stdexcept>
#include <string>

#include "loupe/abi/plugin.h"
#include "loupe/plugin_library.hpp"

namespace loupe {

class HookError : public std::runtime_error {
 public:
  HookError(std::string msg, int status) : std::runtime_error(std::move(msg)), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// A window of a rotating session that ended: its files go into `dir` (loupe_flush_args).
struct WindowEnd {
  std::string dir;
  std::uint64_t start_ns = 0;  // CLOCK_REALTIME
  std::uint64_t end_ns = 0;
};

class PluginInstance {
 public:
  PluginInstance(std::shared_ptr<PluginLibrary> lib, std::string instance_name);
  ~PluginInstance();
  PluginInstance(const PluginInstance&) = delete;
  PluginInstance& operator=(const PluginInstance&) = delete;

  // Each throws HookError on a non-OK status (with the plugin's last_error text).
  void setup(const loupe_setup_args& args);
  void start();
  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);
  void stop(std::uint64_t drain_deadline_ns);
  void flush(bool is_final, const WindowEnd* window = nullptr);
  // Returns the status instead of throwing: called per record on the hot path.
  int consume(const loupe_record& rec);
  // ABI 1.9: whether the plugin exports set_rate (can be thinned under a budget), and the
  // call: keep 1 in `divisor` events, each weighing `divisor`.
  bool thinnable() const;
  void set_rate(std::uint32_t divisor);
  void destroy();

  std::string last_error() const;
  const std::string& name() const { return instance_name_; }
  const std::string& plugin_name() const { return lib_->name(); }
  const loupe_plugin_descriptor& descriptor() const { return lib_->descriptor(); }
  bool is_sink() const { return descriptor().kind == LOUPE_KIND_SINK; }
  bool alive() const { return self_ != nullptr; }

 private:
  [[noreturn]] void fail(const char* hook, int status) const;

  std::shared_ptr<PluginLibrary> lib_;  // keeps the code mapped while the instance lives
  std::string instance_name_;
  loupe_plugin* self_ = nullptr;
};

}  // namespace loupe

#endif  // LOUPE_PLUGINS_PLUGIN_INSTANCE_HPP
