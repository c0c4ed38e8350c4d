// SPDX-License-Identifier: Apache-2.0
#include "session/recording.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "session/session_error.hpp"

namespace loupe {

Status Recording::open_replay() {
  try {
    reader_ = std::make_unique<CaptureReader>(replay_path_);
  } catch (const std::runtime_error& e) {
    return session_error(ExitCode::kUsage, e.what());
  }
  return {};
}

Status Recording::start(RingDispatcher& rings) {
  if (record_path_.empty()) return {};
  try {
    writer_ = std::make_unique<CaptureWriter>(record_path_, rings.ring_table());
  } catch (const std::exception& e) {
    return session_error(ExitCode::kRuntime, e.what());
  }
  rings.set_capture(writer_.get());
  if (rings.ring_count() == 0)
    spdlog::warn("--record: the profile's plugins registered no ring; the capture will be empty");
  return {};
}

Status Recording::replay(RingDispatcher& rings, const std::atomic<bool>& stop) {
  auto table = rings.ring_table();
  std::vector<std::size_t> map;
  for (const auto& cr : reader_->rings()) {
    std::size_t found = table.size();
    for (std::size_t i = 0; i < table.size(); ++i)
      if (table[i].instance == cr.instance && table[i].ring == cr.ring) found = i;
    if (found == table.size())
      return session_error(
          ExitCode::kProfile,
          fmt::format(
              "{}: ring '{}/{}' was recorded but no plugin of the profile registers it in replay "
              "mode (is plugin '{}' enabled, and does it honour LOUPE_SESSION_REPLAY?)",
              replay_path_, cr.instance, cr.ring, cr.instance));
    const auto& t = table[found];
    if (t.record_type != cr.record_type || t.record_version != cr.record_version)
      return session_error(
          ExitCode::kPlugin,
          fmt::format("{}: ring '{}/{}' was recorded with record type {} version {}, the plugin "
                      "now decodes type {} version {}",
                      replay_path_, cr.instance, cr.ring, cr.record_type, cr.record_version,
                      t.record_type, t.record_version));
    map.push_back(found);
  }
  CaptureReader::Record rec;
  try {
    while (!stop.load(std::memory_order_relaxed) && reader_->next(&rec)) {
      rings.inject(map[rec.ring], rec.bytes.data(), static_cast<std::uint32_t>(rec.bytes.size()),
                   true);
      ++replayed_;
    }
  } catch (const std::runtime_error& e) {
    // A capture cut short (a run killed while recording) still gives what it holds.
    spdlog::warn("{} (replayed {} records before it)", e.what(), replayed_);
  }
  return {};
}

void Recording::finish(RingDispatcher& rings) {
  if (!writer_) return;
  rings.set_capture(nullptr);
  recorded_ = writer_->records();
  std::string err = writer_->close();
  if (!err.empty()) spdlog::error("{}", err);
  spdlog::info("recorded {} ring records to {}", recorded_, record_path_);
}

}  // namespace loupe
