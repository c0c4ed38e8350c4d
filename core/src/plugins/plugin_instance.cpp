// SPDX-License-Identifier: Apache-2.0
#include "plugins/plugin_instance.hpp"

#include <fmt/format.h>

namespace loupe {

PluginInstance::PluginInstance(std::shared_ptr<PluginLibrary> lib, std::string instance_name)
    : lib_(std::move(lib)), instance_name_(std::move(instance_name)) {}

PluginInstance::~PluginInstance() {
  destroy();
}

std::string PluginInstance::last_error() const {
  const char* e = descriptor().last_error(self_);
  return e && *e ? e : "(no error text)";
}

void PluginInstance::fail(const char* hook, int status) const {
  throw HookError(fmt::format("{} '{}': {}() failed (status {}): {}", kind_name(descriptor().kind),
                              instance_name_, hook, status, last_error()),
                  status);
}

void PluginInstance::setup(const loupe_setup_args& args) {
  loupe_plugin* out = nullptr;
  int rc = descriptor().setup(&args, &out);
  if (rc != LOUPE_OK) {
    if (out) descriptor().destroy(out);
    self_ = nullptr;  // last_error(NULL) describes the failed setup
    fail("setup", rc);
  }
  if (out == nullptr) {
    throw HookError(
        fmt::format("plugin '{}': setup() returned OK without an instance", instance_name_),
        LOUPE_ERR_INTERNAL);
  }
  self_ = out;
}

void PluginInstance::start() {
  if (!descriptor().start) return;
  loupe_start_args a{sizeof(a), 0};
  if (int rc = descriptor().start(self_, &a); rc != LOUPE_OK) fail("start", rc);
}

void PluginInstance::collect(bool is_final, std::uint64_t ws, std::uint64_t we) {
  if (!descriptor().collect) return;
  loupe_collect_args a{sizeof(a), is_final ? 1u : 0u, ws, we};
  if (int rc = descriptor().collect(self_, &a); rc != LOUPE_OK) fail("collect", rc);
}

void PluginInstance::stop(std::uint64_t deadline) {
  if (!descriptor().stop) return;
  loupe_stop_args a{sizeof(a), 0, deadline};
  if (int rc = descriptor().stop(self_, &a); rc != LOUPE_OK) fail("stop", rc);
}

void PluginInstance::flush(bool is_final, const WindowEnd* window) {
  if (!descriptor().flush) return;
  loupe_flush_args a{sizeof(a), is_final ? 1u : 0u, nullptr, 0, 0};
  if (window) {
    a.window_dir = window->dir.c_str();
    a.window_start_ns = window->start_ns;
    a.window_end_ns = window->end_ns;
  }
  if (int rc = descriptor().flush(self_, &a); rc != LOUPE_OK) fail("flush", rc);
}

int PluginInstance::consume(const loupe_record& rec) {
  return descriptor().consume(self_, &rec);
}

bool PluginInstance::thinnable() const {
  const auto& d = descriptor();
  return !is_sink() && LOUPE_ABI_HAS_FIELD(&d, loupe_plugin_descriptor, set_rate) &&
         d.set_rate != nullptr;
}

void PluginInstance::set_rate(std::uint32_t divisor) {
  if (!thinnable()) throw HookError("the plugin cannot be thinned", LOUPE_ERR_UNSUPPORTED);
  loupe_rate_args a{sizeof(a), divisor};
  if (int rc = descriptor().set_rate(self_, &a); rc != LOUPE_OK) fail("set_rate", rc);
}

void PluginInstance::destroy() {
  if (self_) {
    descriptor().destroy(self_);
    self_ = nullptr;
  }
}

}  // namespace loupe
