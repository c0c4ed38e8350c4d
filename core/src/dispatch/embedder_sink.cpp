// SPDX-License-Identifier: Apache-2.0
#include "dispatch/embedder_sink.hpp"

#include <exception>
#include <map>
#include <mutex>
#include <string>

namespace loupe {
namespace {

struct Instance {
  EmbedderCallbacks callbacks;
  std::string error;
};

std::mutex offered_mu;
std::map<const loupe_host_services*, EmbedderCallbacks>& offered() {
  static std::map<const loupe_host_services*, EmbedderCallbacks> m;
  return m;
}

Instance* self_of(loupe_plugin* p) {
  return reinterpret_cast<Instance*>(p);
}

int setup(const loupe_setup_args* args, loupe_plugin** out) {
  std::lock_guard lock(offered_mu);
  auto it = offered().find(args->services);
  if (it == offered().end()) return LOUPE_ERR_INVALID_ARG;  // not started by a session
  auto* inst = new Instance{std::move(it->second), {}};
  offered().erase(it);
  *out = reinterpret_cast<loupe_plugin*>(inst);
  return LOUPE_OK;
}

// An exception must not cross the C ABI: it fails this call, counted like any sink's
// consume error (a callback failing 100 times in a row disables the sink, said in health).
template <typename F>
int guarded(loupe_plugin* p, const char* what, F&& call) {
  try {
    call();
    return LOUPE_OK;
  } catch (const std::exception& e) {
    self_of(p)->error = std::string(what) + " threw: " + e.what();
  } catch (...) {
    self_of(p)->error = std::string(what) + " threw";
  }
  return LOUPE_ERR_INTERNAL;
}

int consume(loupe_plugin* p, const loupe_record* rec) {
  return guarded(p, "on_record", [&] { self_of(p)->callbacks.on_record(*rec); });
}

int flush(loupe_plugin* p, const loupe_flush_args* args) {
  if (!self_of(p)->callbacks.on_flush) return LOUPE_OK;
  return guarded(p, "on_flush", [&] { self_of(p)->callbacks.on_flush(args->is_final != 0); });
}

void destroy(loupe_plugin* p) {
  delete self_of(p);
}

const char* last_error(loupe_plugin* p) {
  return p ? self_of(p)->error.c_str() : "the embedder sink was not offered its callbacks";
}

const loupe_plugin_descriptor kDescriptor = {
    sizeof(loupe_plugin_descriptor),
    LOUPE_ABI_MAJOR,
    LOUPE_ABI_MINOR,
    LOUPE_KIND_SINK,
    sizeof(loupe_config_key),
    "embedder",
    "1.0.0",
    "records delivered in process to the embedding program's callback",
    nullptr,
    0,
    0,
    setup,
    nullptr,
    nullptr,
    nullptr,
    consume,
    flush,
    destroy,
    last_error,
};

}  // namespace

std::shared_ptr<PluginLibrary> embedder_sink_library() {
  static const std::shared_ptr<PluginLibrary> lib =
      PluginLibrary::from_descriptor(&kDescriptor, "builtin:embedder");
  return lib;
}

void offer_embedder_callbacks(const loupe_host_services* services, EmbedderCallbacks callbacks) {
  std::lock_guard lock(offered_mu);
  offered()[services] = std::move(callbacks);
}

void withdraw_embedder_callbacks(const loupe_host_services* services) {
  std::lock_guard lock(offered_mu);
  offered().erase(services);
}

}  // namespace loupe
