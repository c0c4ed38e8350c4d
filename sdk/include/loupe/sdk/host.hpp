// SPDX-License-Identifier: Apache-2.0
//
// C++ views of the host services table and of a plugin's validated config.
// Thin wrappers: no state beyond the two pointers, cheap to copy.
#ifndef LOUPE_SDK_HOST_HPP
#define LOUPE_SDK_HOST_HPP

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "loupe/abi/host.h"

namespace loupe::sdk {

// The empty key list for plugins without config keys.
inline constexpr loupe_config_key kNoKeys[1] = {};

class Config {
 public:
  Config(const loupe_host_services* svc, const loupe_config* cfg) : svc_(svc), cfg_(cfg) {}

  std::optional<bool> get_bool(const char* key) const {
    int v = 0;
    if (svc_->config_bool(cfg_, key, &v) != LOUPE_OK) return std::nullopt;
    return v != 0;
  }
  std::optional<std::int64_t> get_int(const char* key) const {
    std::int64_t v = 0;
    if (svc_->config_int(cfg_, key, &v) != LOUPE_OK) return std::nullopt;
    return v;
  }
  std::optional<double> get_float(const char* key) const {
    double v = 0;
    if (svc_->config_float(cfg_, key, &v) != LOUPE_OK) return std::nullopt;
    return v;
  }
  std::optional<std::string> get_string(const char* key) const {
    const char* v = nullptr;
    if (svc_->config_string(cfg_, key, &v) != LOUPE_OK || v == nullptr) return std::nullopt;
    return std::string(v);
  }
  // The value of a key whose schema declares a default: the host validated it (type,
  // range, choices) and applied the default, so the plugin states no second default and
  // re-checks nothing. Throws when the key has no value (a schema without a default).
  bool value_bool(const char* key) const { return required(get_bool(key), key); }
  std::int64_t value_int(const char* key) const { return required(get_int(key), key); }
  double value_float(const char* key) const { return required(get_float(key), key); }
  std::string value_string(const char* key) const { return required(get_string(key), key); }

  // For keys without a schema default that the profile may omit.
  bool get_bool(const char* key, bool fallback) const { return get_bool(key).value_or(fallback); }
  std::int64_t get_int(const char* key, std::int64_t fallback) const {
    return get_int(key).value_or(fallback);
  }
  double get_float(const char* key, double fallback) const {
    return get_float(key).value_or(fallback);
  }
  std::string get_string(const char* key, std::string fallback) const {
    return get_string(key).value_or(std::move(fallback));
  }
  template <typename T>
  static T required(std::optional<T> v, const char* key) {
    if (!v)
      throw std::logic_error(std::string("config key '") + key +
                             "' has no value: its schema declares no default");
    return std::move(*v);
  }

  std::vector<std::string> get_strings(const char* key) const {
    std::vector<std::string> out;
    std::uint32_t n = 0;
    if (svc_->config_list_len(cfg_, key, &n) != LOUPE_OK) return out;
    for (std::uint32_t i = 0; i < n; ++i) {
      const char* v = nullptr;
      if (svc_->config_list_string(cfg_, key, i, &v) == LOUPE_OK && v) out.emplace_back(v);
    }
    return out;
  }
  std::vector<std::int64_t> get_ints(const char* key) const {
    std::vector<std::int64_t> out;
    std::uint32_t n = 0;
    if (svc_->config_list_len(cfg_, key, &n) != LOUPE_OK) return out;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::int64_t v = 0;
      if (svc_->config_list_int(cfg_, key, i, &v) == LOUPE_OK) out.push_back(v);
    }
    return out;
  }
  std::vector<Config> get_tables(const char* key) const {
    std::vector<Config> out;
    std::uint32_t n = 0;
    if (svc_->config_list_len(cfg_, key, &n) != LOUPE_OK) return out;
    for (std::uint32_t i = 0; i < n; ++i) {
      const loupe_config* sub = nullptr;
      if (svc_->config_list_table(cfg_, key, i, &sub) == LOUPE_OK) out.emplace_back(svc_, sub);
    }
    return out;
  }

 private:
  const loupe_host_services* svc_;
  const loupe_config* cfg_;
};

class Host {
 public:
  explicit Host(const loupe_host_services* svc) : svc_(svc) {}

  const loupe_host_services* raw() const { return svc_; }
  loupe_host* handle() const { return svc_->host; }

  void log(loupe_log_level level, const std::string& msg) const {
    svc_->log(svc_->host, level, msg.c_str());
  }
  void info(const std::string& msg) const { log(LOUPE_LOG_INFO, msg); }
  void warn(const std::string& msg) const { log(LOUPE_LOG_WARN, msg); }
  void debug(const std::string& msg) const { log(LOUPE_LOG_DEBUG, msg); }

  // 1 = available; `reason` gets the preflight's explanation either way.
  bool feature(const char* name, std::string* reason = nullptr) const {
    const char* why = nullptr;
    int rc = svc_->feature_available(svc_->host, name, &why);
    if (reason) *reason = why ? why : "";
    return rc == 1;
  }
  bool tracepoint_exists(const std::string& cat_colon_name) const {
    return svc_->tracepoint_exists(svc_->host, cat_colon_name.c_str()) == 1;
  }
  bool ksym_exists(const std::string& name) const {
    return svc_->ksym_exists(svc_->host, name.c_str()) == 1;
  }
  std::string last_error() const {
    const char* e = svc_->last_error(svc_->host);
    return e ? e : "";
  }

  int bpf_load(bpf_object* obj) const { return svc_->bpf_load(svc_->host, obj); }
  int bpf_attach(bpf_program* prog, const std::string& probe) const {
    return svc_->bpf_attach(svc_->host, prog, probe.c_str());
  }
  int adopt_link(bpf_link* link, bpf_program* prog, const std::string& probe, int err) const {
    return svc_->bpf_adopt_link(svc_->host, link, prog, probe.c_str(), err);
  }
  // The same, naming the target ("uprobe:PATH+0xOFF", see uprobe_target()) for kernels whose
  // link info does not; a host before ABI 1.2 gets the plain call.
  int adopt_link(bpf_link* link, bpf_program* prog, const std::string& probe, int err,
                 const std::string& target) const {
    if (!LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, bpf_adopt_link_at) ||
        !svc_->bpf_adopt_link_at)
      return adopt_link(link, prog, probe, err);
    return svc_->bpf_adopt_link_at(svc_->host, link, prog, probe.c_str(), target.c_str(), err);
  }
  int register_ring(const loupe_ring_spec& spec) const {
    return svc_->ring_register(svc_->host, &spec);
  }
  int emit(const loupe_record& rec) const { return svc_->emit(svc_->host, &rec); }
  int symbolize(std::uint32_t pid, loupe_frame_kind kind, const std::uint64_t* addrs,
                std::uint32_t n, loupe_frame* out) const {
    return svc_->symbolize(svc_->host, pid, kind, addrs, n, out);
  }
  // Data address -> global variable name; false when the host predates the service.
  bool symbolize_data(std::uint32_t pid, std::uint64_t addr, loupe_frame* out) const {
    if (!LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, symbolize_data) || !svc_->symbolize_data)
      return false;
    return svc_->symbolize_data(svc_->host, pid, addr, out) == LOUPE_OK;
  }
  void invalidate_symbols(std::uint32_t pid) const {
    if (LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, symbols_invalidate) &&
        svc_->symbols_invalidate)
      svc_->symbols_invalidate(svc_->host, pid);
  }
  // Whether the host can unwind user stacks from copies (ABI 1.2).
  bool can_unwind_user() const {
    return LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, unwind_user) && svc_->unwind_user;
  }
  // Unwinds a copied user stack (see loupe_host_services.unwind_user): `out` is resized to
  // the addresses found, leaf first, ready for symbolize(). Returns why the walk stopped;
  // LOUPE_UNWIND_UNSUPPORTED when the host predates the service.
  loupe_unwind_status unwind_user(std::uint32_t pid, const loupe_user_regs& regs, const void* stack,
                                  std::uint32_t stack_len, std::vector<std::uint64_t>& out,
                                  std::uint32_t max) const {
    out.resize(max);
    std::uint32_t n = 0, reason = LOUPE_UNWIND_UNSUPPORTED;
    if (!can_unwind_user() || svc_->unwind_user(svc_->host, pid, &regs, stack, stack_len,
                                                out.data(), max, &n, &reason) != LOUPE_OK)
      n = 0, reason = LOUPE_UNWIND_UNSUPPORTED;
    out.resize(n);
    return static_cast<loupe_unwind_status>(reason);
  }
  // The session's unwinder maps (ABI 1.10; abi/host.h unwinder_maps): false when the host
  // keeps none.
  bool unwinder_maps(const loupe_map_ref** maps, std::uint32_t* n) const {
    return LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, unwinder_maps) && svc_->unwinder_maps &&
           svc_->unwinder_maps(svc_->host, maps, n) == LOUPE_OK;
  }
  // As symbolize(), for a whole stack: a frame that stands for several (a compiled Java
  // frame and the methods inlined at its pc) expands into each, innermost first (ABI
  // 1.10; an older host names one frame per address).
  int symbolize_stack(std::uint32_t pid, loupe_frame_kind kind, const std::uint64_t* addrs,
                      std::uint32_t n, std::vector<loupe_frame>* out) const {
    if (!LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, symbolize_stack) ||
        !svc_->symbolize_stack) {
      out->resize(n);
      return symbolize(pid, kind, addrs, n, out->data());
    }
    // Room for every frame to expand a few times; a stack that needs more is cut at its root.
    out->resize(static_cast<std::size_t>(n) * 4 + 16);
    std::uint32_t got = 0;
    const int rc = svc_->symbolize_stack(svc_->host, pid, kind, addrs, n, out->data(),
                                         static_cast<std::uint32_t>(out->size()), &got);
    out->resize(rc == LOUPE_OK ? got : 0);
    return rc;
  }
  // Whether the host offers attach_unwind_tables() (ABI 1.5): known before load, so a
  // plugin can choose its walk while its BPF object is still open.
  bool can_keep_unwind_tables() const {
    return LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, unwind_tables_attach) &&
           svc_->unwind_tables_attach;
  }
  // Asks the host to keep the in-kernel unwinder's maps (unwind.bpf.h's loupe_unwind_rows
  // and loupe_unwind_procs, loaded) filled for the target's processes (ABI 1.5). False,
  // with last_error(), when the host predates the service or refuses the maps.
  bool attach_unwind_tables(int rows_fd, int procs_fd) const {
    if (!can_keep_unwind_tables()) return false;
    return svc_->unwind_tables_attach(svc_->host, rows_fd, procs_fd) == LOUPE_OK;
  }
  // And its loupe_unwind_files (ABI 1.6): a process without an entry yet is unwound by the
  // rows of the files it maps. False on an older host, which fills the others only.
  bool attach_unwind_files(int procs_fd, int files_fd) const {
    if (!LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, unwind_files_attach) ||
        !svc_->unwind_files_attach)
      return false;
    return svc_->unwind_files_attach(svc_->host, procs_fd, files_fd) == LOUPE_OK;
  }
  // And its Python maps (ABI 1.7): the host names the Python frames of the interpreters it
  // finds. False on an older host: such stacks keep their native frames only.
  bool attach_unwind_python(int procs_fd, int python_procs_fd, int codes_fd, int ring_fd) const {
    if (!LOUPE_ABI_HAS_FIELD(svc_, loupe_host_services, unwind_python_attach) ||
        !svc_->unwind_python_attach)
      return false;
    return svc_->unwind_python_attach(svc_->host, procs_fd, python_procs_fd, codes_fd, ring_fd) ==
           LOUPE_OK;
  }
  std::uint64_t now_ns(loupe_clock clock = LOUPE_CLOCK_MONOTONIC) const {
    return svc_->now_ns(svc_->host, clock);
  }
  // The CLOCK_MONOTONIC reading (bpf_ktime_get_ns's clock) at a realtime instant such as a
  // window's end. A final collect runs after the detach and drain, which take up to seconds:
  // what was still going on "at the end" is measured to the window's end, not to now.
  std::uint64_t monotonic_at_wall(std::uint64_t wall_ns) const {
    const std::uint64_t wall = now_ns(LOUPE_CLOCK_REALTIME);
    const std::uint64_t mono = now_ns(LOUPE_CLOCK_MONOTONIC);
    if (wall_ns >= wall) return mono;
    return wall - wall_ns >= mono ? 0 : mono - (wall - wall_ns);
  }
  std::uint64_t boot_to_wall_ns(std::uint64_t boot_ns) const {
    return svc_->boot_to_wall_ns(svc_->host, boot_ns);
  }

 private:
  const loupe_host_services* svc_;
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_HOST_HPP
