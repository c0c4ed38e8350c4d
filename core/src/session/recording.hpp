// SPDX-License-Identifier: Apache-2.0
//
// A session's capture file: every raw ring record written as it is read (`loupe run
// --record`), or a capture fed back through decode and sinks with no kernel (`loupe replay`).
#ifndef LOUPE_SESSION_RECORDING_HPP
#define LOUPE_SESSION_RECORDING_HPP

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "dispatch/capture_file.hpp"
#include "dispatch/ring_dispatcher.hpp"
#include "util/result.hpp"

namespace loupe {

class Recording {
 public:
  // `record_path`, `replay_path`: the session's options; at most one is set.
  Recording(std::string record_path, std::string replay_path)
      : record_path_(std::move(record_path)), replay_path_(std::move(replay_path)) {}

  bool replaying() const { return !replay_path_.empty(); }
  // Replay: the capture must open before any plugin is set up (kUsage otherwise).
  Status open_replay();
  // Record: once every plugin has registered its rings, before they are read.
  Status start(RingDispatcher& rings);
  // Replay: maps the capture's rings onto those the plugins registered in replay mode,
  // then feeds every record through the normal path until the end or `stop`.
  Status replay(RingDispatcher& rings, const std::atomic<bool>& stop);
  // Record: after the rings drained; the capture is closed and complete.
  void finish(RingDispatcher& rings);

  std::uint64_t recorded() const { return recorded_; }
  std::uint64_t replayed() const { return replayed_; }

 private:
  std::string record_path_, replay_path_;
  std::unique_ptr<CaptureWriter> writer_;
  std::unique_ptr<CaptureReader> reader_;
  std::uint64_t recorded_ = 0, replayed_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_RECORDING_HPP
