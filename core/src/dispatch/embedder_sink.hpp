// SPDX-License-Identifier: Apache-2.0
//
// The embedder's in-process sink (SessionOptions::on_record): a built-in sink plugin, run
// like any other behind its own SinkRunner (own thread, bounded queue), so a slow callback
// drops records, counted in its health row, and never stalls the rings or another sink.
// The callbacks reach the instance through the host services pointer its setup() gets,
// which is unique to that instance: several sessions in one process each keep their own.
#ifndef LOUPE_DISPATCH_EMBEDDER_SINK_HPP
#define LOUPE_DISPATCH_EMBEDDER_SINK_HPP

#include <functional>
#include <memory>

#include "loupe/abi/plugin.h"
#include "loupe/plugin_library.hpp"

namespace loupe {

struct EmbedderCallbacks {
  std::function<void(const loupe_record&)> on_record;  // the sink's thread; rec for the call
  std::function<void(bool is_final)> on_flush;         // optional; the sink's thread
};

// The built-in sink's library ("embedder"), shared by every session.
std::shared_ptr<PluginLibrary> embedder_sink_library();

// Hands `callbacks` to the instance whose setup() will be given `services`; the instance
// takes them over at setup (an entry never claimed is dropped with withdraw()).
void offer_embedder_callbacks(const loupe_host_services* services, EmbedderCallbacks callbacks);
void withdraw_embedder_callbacks(const loupe_host_services* services);

}  // namespace loupe

#endif  // LOUPE_DISPATCH_EMBEDDER_SINK_HPP
