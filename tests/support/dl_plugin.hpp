// SPDX-License-Identifier: Apache-2.0
//
// dlopen a built plugin library and drive one instance through the C ABI, the way the
// core does, so a test exercises exactly what ships.
#ifndef LOUPE_TESTS_SINKS_DL_PLUGIN_HPP
#define LOUPE_TESTS_SINKS_DL_PLUGIN_HPP

#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "fake_host.hpp"
#include "loupe/abi/plugin.h"

namespace loupe::test {

class DlPlugin {
 public:
  explicit DlPlugin(const std::string& path) {
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error("dlopen " + path + ": " + ::dlerror());
    auto entry =
        reinterpret_cast<loupe_plugin_entry_fn>(::dlsym(handle_, LOUPE_PLUGIN_ENTRY_SYMBOL));
    if (!entry) throw std::runtime_error(path + ": no " LOUPE_PLUGIN_ENTRY_SYMBOL);
    desc_ = entry();
  }
  ~DlPlugin() {
    if (handle_) ::dlclose(handle_);
  }
  DlPlugin(const DlPlugin&) = delete;
  DlPlugin& operator=(const DlPlugin&) = delete;

  const loupe_plugin_descriptor* descriptor() const { return desc_; }

 private:
  void* handle_ = nullptr;
  const loupe_plugin_descriptor* desc_ = nullptr;
};

// One instance: setup() in the constructor call `setup(host)`, destroy() at scope exit.
class PluginInstance {
 public:
  explicit PluginInstance(const DlPlugin& lib) : desc_(lib.descriptor()) {}
  ~PluginInstance() {
    if (self_) desc_->destroy(self_);
  }
  PluginInstance(const PluginInstance&) = delete;
  PluginInstance& operator=(const PluginInstance&) = delete;

  int setup(FakeHost& host) {
    host.declare(desc_);
    args_ = host.setup_args();
    return desc_->setup(&args_, &self_);
  }
  int consume(const loupe_record& rec) { return desc_->consume(self_, &rec); }
  int flush(bool is_final) {
    loupe_flush_args a{sizeof(a), is_final ? 1u : 0u, nullptr, 0, 0};
    return desc_->flush(self_, &a);
  }
  // The end of a window of a rotating session: the sink writes it into `dir`.
  int end_window(const std::string& dir, std::uint64_t start_ns, std::uint64_t end_ns) {
    loupe_flush_args a{sizeof(a), 0u, dir.c_str(), start_ns, end_ns};
    return desc_->flush(self_, &a);
  }
  void destroy() {
    if (self_) desc_->destroy(self_);
    self_ = nullptr;
  }
  std::string last_error() const {
    const char* e = desc_->last_error(self_);
    return e ? e : "";
  }

 private:
  const loupe_plugin_descriptor* desc_;
  loupe_plugin* self_ = nullptr;
  loupe_setup_args args_{};
};

}  // namespace loupe::test

#endif
