// SPDX-License-Identifier: Apache-2.0
//
// Header-only C++ layer over the C ABI (sdk/include/loupe/abi/). Source-stable, not
// ABI-stable: it is compiled into each plugin, so the host never sees these types.
//
//   class MyProfiler : public loupe::sdk::Profiler {
//    public:
//     void setup(const loupe::sdk::SetupArgs& a) override;   // parse config, open BPF
//     void start(const loupe::sdk::StartArgs& a) override;   // load, attach, rings
//     void collect(const loupe::sdk::CollectArgs& a) override; // read maps, emit records
//   };
//   LOUPE_PROFILER(MyProfiler, "myprof", "1.0.0", "what it measures", kMyKeys)
//
// Any exception leaving a hook is caught by the generated shim (the exception firewall),
// turned into a status code, and its what() becomes last_error(). Throw loupe::sdk::Error
// to choose the status code.
#ifndef LOUPE_SDK_PLUGIN_HPP
#define LOUPE_SDK_PLUGIN_HPP

#include <array>
#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>

#include "loupe/abi/plugin.h"
#include "loupe/sdk/host.hpp"

namespace loupe::sdk {

class Error : public std::runtime_error {
 public:
  Error(loupe_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
  loupe_status status() const noexcept { return status_; }

 private:
  loupe_status status_;
};

struct SetupArgs {
  Host host;
  Config config;
  const loupe_session_info* session;
};
struct StartArgs {
  const loupe_start_args* raw;
};
// A record says which window its values cover (docs/records.md): this report's, from
// window_start_ns (what changed since the previous report: interval deltas), or the whole
// session so far, from session_start_ns (running totals, states). The two are equal in the
// first interval report and in the final one, which covers the session.
struct CollectArgs {
  bool is_final;
  std::uint64_t window_start_ns;
  std::uint64_t window_end_ns;
  // CLOCK_REALTIME: window(session_start_ns, window_end_ns) says "since the start".
  std::uint64_t session_start_ns = 0;
};
struct StopArgs {
  std::uint64_t drain_deadline_ns;  // CLOCK_MONOTONIC
};
// window_dir non-empty: a window of a rotating session ended (loupe_flush_args.window_dir):
// write what the window's interval records add up to there, then start the next one empty.
struct FlushArgs {
  bool is_final;
  std::string window_dir;
  std::uint64_t window_start_ns = 0;
  std::uint64_t window_end_ns = 0;
};

// ABI 1.9: keep 1 in `divisor` events, each weighing `divisor` (loupe_rate_args). A
// profiler that can be thinned declares `void set_rate(const RateArgs&)`; the SDK exports
// the hook only then, so the host knows which plugins a budget can thin. Throw
// Error(LOUPE_ERR_UNSUPPORTED, why) from it when the mode running cannot be thinned.
struct RateArgs {
  std::uint32_t divisor;
};

// `[session] rotate` in seconds (0: the session is one window, or an older host).
inline double rotate_seconds(const loupe_session_info* s) {
  return s && LOUPE_ABI_HAS_FIELD(s, loupe_session_info, rotate_s) ? s->rotate_s : 0;
}

// Common to both kinds; hooks default to doing nothing.
class PluginBase {
 public:
  virtual ~PluginBase() = default;
  virtual void setup(const SetupArgs& args) = 0;
  virtual void start(const StartArgs&) {}
  virtual void stop(const StopArgs&) {}
  virtual void flush(const FlushArgs&) {}

  std::string last_error_;              // owned here so last_error() text outlives the hook call
  std::uint64_t session_start_ns_ = 0;  // loupe_session_info.start_wall_ns, for CollectArgs
};

class Profiler : public PluginBase {
 public:
  static constexpr loupe_plugin_kind kKind = LOUPE_KIND_PROFILER;
  virtual void collect(const CollectArgs&) {}
  virtual void consume(const loupe_record&) {}
};

class Sink : public PluginBase {
 public:
  static constexpr loupe_plugin_kind kKind = LOUPE_KIND_SINK;
  virtual void collect(const CollectArgs&) {}
  // Called on the sink's own thread; the record is borrowed for the call.
  virtual void consume(const loupe_record& rec) = 0;
};

namespace detail {

inline std::string& setup_error() {
  thread_local std::string text;
  return text;
}

// The exception firewall: nothing thrown inside a plugin crosses the C boundary.
template <typename Fn>
int guarded(std::string& error_out, Fn&& fn) noexcept {
  try {
    fn();
    return LOUPE_OK;
  } catch (const Error& e) {
    error_out = e.what();
    return e.status();
  } catch (const std::bad_alloc&) {
    error_out = "out of memory";
    return LOUPE_ERR_RESOURCE;
  } catch (const std::exception& e) {
    error_out = e.what();
    return LOUPE_ERR_INTERNAL;
  } catch (...) {
    error_out = "unknown exception";
    return LOUPE_ERR_INTERNAL;
  }
}

template <typename T>
T* self(loupe_plugin* p) {
  return reinterpret_cast<T*>(p);
}

template <typename T>
struct Shims {
  static int setup(const loupe_setup_args* args, loupe_plugin** out) noexcept {
    setup_error().clear();
    T* instance = nullptr;
    int rc = guarded(setup_error(), [&] {
      instance = new T();
      SetupArgs a{Host(args->services), Config(args->services, args->config), args->session};
      if (args->session) instance->session_start_ns_ = args->session->start_wall_ns;
      try {
        instance->setup(a);
      } catch (...) {
        delete instance;
        instance = nullptr;
        throw;
      }
    });
    *out = reinterpret_cast<loupe_plugin*>(static_cast<PluginBase*>(instance));
    return rc;
  }
  static int start(loupe_plugin* p, const loupe_start_args* a) noexcept {
    auto* s = static_cast<T*>(self<PluginBase>(p));
    return guarded(s->last_error_, [&] { s->start(StartArgs{a}); });
  }
  static int collect(loupe_plugin* p, const loupe_collect_args* a) noexcept {
    auto* s = static_cast<T*>(self<PluginBase>(p));
    return guarded(s->last_error_, [&] {
      // A host that did not say when the session began: its first window starts there.
      if (!s->session_start_ns_) s->session_start_ns_ = a->window_start_ns;
      s->collect(CollectArgs{a->is_final != 0, a->window_start_ns, a->window_end_ns,
                             s->session_start_ns_});
    });
  }
  static int stop(loupe_plugin* p, const loupe_stop_args* a) noexcept {
    auto* s = static_cast<T*>(self<PluginBase>(p));
    return guarded(s->last_error_, [&] { s->stop(StopArgs{a->drain_deadline_ns}); });
  }
  static int consume(loupe_plugin* p, const loupe_record* r) noexcept {
    auto* s = static_cast<T*>(self<PluginBase>(p));
    return guarded(s->last_error_, [&] { s->consume(*r); });
  }
  static int flush(loupe_plugin* p, const loupe_flush_args* a) noexcept {
    auto* s = static_cast<T*>(self<PluginBase>(p));
    return guarded(s->last_error_, [&] {
      FlushArgs f{a->is_final != 0, {}, 0, 0};
      if (LOUPE_ABI_HAS_FIELD(a, loupe_flush_args, window_end_ns) && a->window_dir) {
        f.window_dir = a->window_dir;
        f.window_start_ns = a->window_start_ns;
        f.window_end_ns = a->window_end_ns;
      }
      s->flush(f);
    });
  }
  static int set_rate(loupe_plugin* p, const loupe_rate_args* a) noexcept {
    auto* s = static_cast<T*>(self<PluginBase>(p));
    return guarded(s->last_error_, [&] {
      if constexpr (requires(T & t) { t.set_rate(RateArgs{}); })
        s->set_rate(RateArgs{a->divisor < 1 ? 1u : a->divisor});
    });
  }
  static void destroy(loupe_plugin* p) noexcept {
    try {
      delete static_cast<T*>(self<PluginBase>(p));
    } catch (...) {
    }
  }
  static const char* last_error(loupe_plugin* p) noexcept {
    if (p == nullptr) return setup_error().c_str();
    return self<PluginBase>(p)->last_error_.c_str();
  }
};

template <typename T>
constexpr loupe_plugin_descriptor make_descriptor(const char* name, const char* version,
                                                  const char* description,
                                                  const loupe_config_key* keys, std::size_t N) {
  loupe_plugin_descriptor d{};
  d.size = sizeof(loupe_plugin_descriptor);
  d.abi_major = LOUPE_ABI_MAJOR;
  d.abi_minor = LOUPE_ABI_MINOR;
  d.kind = T::kKind;
  d.config_key_size = sizeof(loupe_config_key);
  d.name = name;
  d.version = version;
  d.description = description;
  d.config_keys = keys;
  d.n_config_keys = static_cast<std::uint32_t>(N);
  d.setup = &Shims<T>::setup;
  d.start = &Shims<T>::start;
  d.collect = &Shims<T>::collect;
  d.stop = &Shims<T>::stop;
  d.consume = T::kKind == LOUPE_KIND_SINK ? &Shims<T>::consume : nullptr;
  d.flush = &Shims<T>::flush;
  d.destroy = &Shims<T>::destroy;
  d.last_error = &Shims<T>::last_error;
  if constexpr (requires(T & t) { t.set_rate(RateArgs{}); }) d.set_rate = &Shims<T>::set_rate;
  return d;
}

template <typename T, std::size_t N>
constexpr loupe_plugin_descriptor make_descriptor(const char* name, const char* version,
                                                  const char* description,
                                                  const loupe_config_key (&keys)[N]) {
  return make_descriptor<T>(name, version, description, keys, N);
}

// A schema built with concat_keys() (loupe/sdk/target_filter.hpp) is a std::array.
template <typename T, std::size_t N>
constexpr loupe_plugin_descriptor make_descriptor(const char* name, const char* version,
                                                  const char* description,
                                                  const std::array<loupe_config_key, N>& keys) {
  return make_descriptor<T>(name, version, description, keys.data(), N);
}

}  // namespace detail
}  // namespace loupe::sdk

// Generates the exported entry symbol and the C shims for one plugin class.
// `keys` is a static array of loupe_config_key, C-style or the std::array concat_keys() makes
// (use loupe::sdk::kNoKeys when there are none).
#define LOUPE_PLUGIN_DEFINE(CLASS, NAME, VERSION, DESCRIPTION, KEYS)                    \
  extern "C" LOUPE_ABI_EXPORT const loupe_plugin_descriptor* loupe_plugin_entry(void) { \
    static const loupe_plugin_descriptor descriptor =                                   \
        ::loupe::sdk::detail::make_descriptor<CLASS>(NAME, VERSION, DESCRIPTION, KEYS); \
    return &descriptor;                                                                 \
  }

#define LOUPE_PROFILER(CLASS, NAME, VERSION, DESCRIPTION, KEYS) \
  LOUPE_PLUGIN_DEFINE(CLASS, NAME, VERSION, DESCRIPTION, KEYS)
#define LOUPE_SINK(CLASS, NAME, VERSION, DESCRIPTION, KEYS) \
  LOUPE_PLUGIN_DEFINE(CLASS, NAME, VERSION, DESCRIPTION, KEYS)

#endif  // LOUPE_SDK_PLUGIN_HPP
