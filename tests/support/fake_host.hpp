// SPDX-License-Identifier: Apache-2.0
//
// A minimal in-process loupe_host_services for unit tests of plugins that need only
// config, logging and clocks (sinks). The plugin is the thing under test; this fake
// stands in for the core. Config values are given by the test; keys the test leaves
// unset fall back to the defaults the plugin declares, as the real host does. BPF, ring
// and symbolization services answer LOUPE_ERR_UNSUPPORTED.
#ifndef LOUPE_TESTS_SINKS_FAKE_HOST_HPP
#define LOUPE_TESTS_SINKS_FAKE_HOST_HPP

#include <time.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "loupe/abi/plugin.h"

namespace loupe::test {

using ConfigValue = std::variant<bool, std::int64_t, double, std::string>;

class FakeHost {
 public:
  FakeHost() {
    svc_.size = sizeof(svc_);
    svc_.abi_major = LOUPE_ABI_MAJOR;
    svc_.abi_minor = LOUPE_ABI_MINOR;
    svc_.host = reinterpret_cast<loupe_host*>(this);
    svc_.log = &log_cb;
    svc_.config_bool = &config_bool_cb;
    svc_.config_int = &config_int_cb;
    svc_.config_float = &config_float_cb;
    svc_.config_string = &config_string_cb;
    svc_.config_list_len = &config_list_len_cb;
    svc_.config_list_string = &config_list_string_cb;
    svc_.config_list_int = &config_list_int_cb;
    svc_.config_list_table = &config_list_table_cb;
    svc_.feature_available = &feature_cb;
    svc_.tracepoint_exists = &exists_cb;
    svc_.ksym_exists = &exists_cb;
    svc_.bpf_load = &bpf_load_cb;
    svc_.bpf_attach = &bpf_attach_cb;
    svc_.bpf_adopt_link = &bpf_adopt_cb;
    svc_.ring_register = &ring_register_cb;
    svc_.emit = &emit_cb;
    svc_.symbolize = &symbolize_cb;
    svc_.now_ns = &now_cb;
    svc_.boot_to_wall_ns = &boot_to_wall_cb;
    svc_.last_error = &last_error_cb;
    session_.size = sizeof(session_);
    session_.instance_name = "test";
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  void set(const std::string& key, ConfigValue v) { values_[key] = std::move(v); }
  // Apply the plugin's declared defaults for keys the test did not set.
  void declare(const loupe_plugin_descriptor* d) {
    for (std::uint32_t i = 0; i < d->n_config_keys; ++i) {
      const auto* k = reinterpret_cast<const loupe_config_key*>(
          reinterpret_cast<const char*>(d->config_keys) + i * d->config_key_size);
      if (k->default_value && !defaults_.count(k->name))
        defaults_[k->name] = parse_literal(k->type, k->default_value);
    }
  }
  // [session] rotate as a host of ABI 1.8 tells it.
  void set_rotate(double seconds) { session_.rotate_s = seconds; }
  void set_output_dir(std::string dir) {
    output_dir_ = std::move(dir);
    session_.output_dir = output_dir_.c_str();
  }

  const loupe_host_services* services() const { return &svc_; }
  const loupe_config* config() const { return reinterpret_cast<const loupe_config*>(this); }
  loupe_session_info* session() { return &session_; }
  loupe_setup_args setup_args() const {
    return loupe_setup_args{sizeof(loupe_setup_args), 0, &svc_, config(), &session_};
  }

  std::vector<std::pair<std::uint32_t, std::string>> logs() const {
    std::lock_guard lock(mu_);
    return logs_;
  }
  std::uint64_t emitted() const { return emitted_; }

 private:
  static FakeHost* self(loupe_host* h) { return reinterpret_cast<FakeHost*>(h); }
  static const FakeHost* self(const loupe_config* c) {
    return reinterpret_cast<const FakeHost*>(c);
  }

  static ConfigValue parse_literal(std::uint32_t type, const std::string& text) {
    switch (type) {
      case LOUPE_CFG_BOOL: return text == "true";
      case LOUPE_CFG_INT: return static_cast<std::int64_t>(std::stoll(text));
      case LOUPE_CFG_FLOAT: return std::stod(text);
      default:
        if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
          return text.substr(1, text.size() - 2);
        return text;
    }
  }

  const ConfigValue* find(const char* key) const {
    auto it = values_.find(key);
    if (it != values_.end()) return &it->second;
    auto d = defaults_.find(key);
    return d != defaults_.end() ? &d->second : nullptr;
  }
  template <typename T>
  static int get(const loupe_config* cfg, const char* key, T* out) {
    const FakeHost* h = self(cfg);
    const ConfigValue* v = h->find(key);
    if (!v) return h->fail(LOUPE_ERR_NOT_FOUND, std::string("no value for key ") + key);
    if (const T* p = std::get_if<T>(v)) {
      *out = *p;
      return LOUPE_OK;
    }
    return h->fail(LOUPE_ERR_INVALID_ARG, std::string("wrong type for key ") + key);
  }
  int fail(int status, std::string why) const {
    last_error_text() = std::move(why);
    return status;
  }
  static std::string& last_error_text() {
    thread_local std::string text;
    return text;
  }

  static void log_cb(loupe_host* h, std::uint32_t level, const char* msg) {
    std::lock_guard lock(self(h)->mu_);
    self(h)->logs_.emplace_back(level, msg ? msg : "");
  }
  static int config_bool_cb(const loupe_config* c, const char* k, int* out) {
    bool b = false;
    int rc = get<bool>(c, k, &b);
    if (rc == LOUPE_OK) *out = b ? 1 : 0;
    return rc;
  }
  static int config_int_cb(const loupe_config* c, const char* k, std::int64_t* out) {
    return get<std::int64_t>(c, k, out);
  }
  static int config_float_cb(const loupe_config* c, const char* k, double* out) {
    return get<double>(c, k, out);
  }
  static int config_string_cb(const loupe_config* c, const char* k, const char** out) {
    const FakeHost* h = self(c);
    const ConfigValue* v = h->find(k);
    if (!v) return h->fail(LOUPE_ERR_NOT_FOUND, std::string("no value for key ") + k);
    const auto* s = std::get_if<std::string>(v);
    if (!s) return h->fail(LOUPE_ERR_INVALID_ARG, std::string("wrong type for key ") + k);
    *out = s->c_str();
    return LOUPE_OK;
  }
  static int config_list_len_cb(const loupe_config* c, const char* k, std::uint32_t*) {
    return self(c)->fail(LOUPE_ERR_NOT_FOUND, std::string("fake host has no lists: ") + k);
  }
  static int config_list_string_cb(const loupe_config* c, const char* k, std::uint32_t,
                                   const char**) {
    return config_list_len_cb(c, k, nullptr);
  }
  static int config_list_int_cb(const loupe_config* c, const char* k, std::uint32_t,
                                std::int64_t*) {
    return config_list_len_cb(c, k, nullptr);
  }
  static int config_list_table_cb(const loupe_config* c, const char* k, std::uint32_t,
                                  const loupe_config**) {
    return config_list_len_cb(c, k, nullptr);
  }
  static int feature_cb(loupe_host*, const char*, const char** reason) {
    if (reason) *reason = "fake host: no kernel features";
    return -1;
  }
  static int exists_cb(loupe_host*, const char*) { return 0; }
  static int bpf_load_cb(loupe_host* h, bpf_object*) { return self(h)->unsupported(); }
  static int bpf_attach_cb(loupe_host* h, bpf_program*, const char*) {
    return self(h)->unsupported();
  }
  static int bpf_adopt_cb(loupe_host* h, bpf_link*, bpf_program*, const char*, int) {
    return self(h)->unsupported();
  }
  static int ring_register_cb(loupe_host* h, const loupe_ring_spec*) {
    return self(h)->unsupported();
  }
  static int emit_cb(loupe_host* h, const loupe_record*) {
    ++self(h)->emitted_;
    return LOUPE_OK;
  }
  static int symbolize_cb(loupe_host* h, std::uint32_t, std::uint32_t, const std::uint64_t*,
                          std::uint32_t, loupe_frame*) {
    return self(h)->unsupported();
  }
  static std::uint64_t now_cb(loupe_host*, std::uint32_t clock) {
    timespec ts{};
    clock_gettime(clock == LOUPE_CLOCK_REALTIME   ? CLOCK_REALTIME
                  : clock == LOUPE_CLOCK_BOOTTIME ? CLOCK_BOOTTIME
                                                  : CLOCK_MONOTONIC,
                  &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
  }
  static std::uint64_t boot_to_wall_cb(loupe_host* h, std::uint64_t boot_ns) {
    return boot_ns + now_cb(h, LOUPE_CLOCK_REALTIME) - now_cb(h, LOUPE_CLOCK_BOOTTIME);
  }
  static const char* last_error_cb(loupe_host*) { return last_error_text().c_str(); }
  int unsupported() const { return fail(LOUPE_ERR_UNSUPPORTED, "not provided by the fake host"); }

  loupe_host_services svc_{};
  loupe_session_info session_{};
  std::string output_dir_;
  std::map<std::string, ConfigValue> values_;
  std::map<std::string, ConfigValue> defaults_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::uint32_t, std::string>> logs_;
  std::uint64_t emitted_ = 0;
};

}  // namespace loupe::test

#endif
