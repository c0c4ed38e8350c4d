// SPDX-License-Identifier: Apache-2.0
//
// jsonl sink: one JSON object per record per line (schema in docs/records.md), for jq,
// pandas and anything that reads newline-delimited JSON.
#include <cstdint>
#include <memory>
#include <string>

#include "loupe/sdk/output_file.hpp"
#include "loupe/sdk/plugin.hpp"
#include "record_json.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"records.jsonl\"",
     "output file, relative to the session output_dir; \"-\" = stdout", 0, 0, nullptr, 0, 0},
    {"flush_every", LOUPE_CFG_INT, 0, "0",
     "write after this many buffered records; 0 = only when the host flushes", 0, 1000000, nullptr,
     0, 0},
};

constexpr std::size_t kMaxPendingBytes = std::size_t{1} << 20;

class JsonlSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    std::string path = args.config.value_string("path");
    flush_every_ = args.config.value_int("flush_every");
    if (flush_every_ < 0)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                       "jsonl: flush_every must be >= 0, got " + std::to_string(flush_every_));
    const char* dir = args.session ? args.session->output_dir : nullptr;
    out_ = std::make_unique<sdk::OutputFile>(path, dir, "jsonl");
  }

  void consume(const loupe_record& rec) override {
    pending_ += record_to_line(rec);
    pending_ += '\n';
    ++n_pending_;
    // Lines wait for the host's flush (one write per interval), but not beyond a bound: a
    // final report of a large process tree is tens of MB of JSON, which would otherwise
    // sit in memory twice (here and in the records) before it reaches the disk.
    if (pending_.size() >= kMaxPendingBytes || (flush_every_ > 0 && n_pending_ >= flush_every_))
      write_pending();
  }

  void flush(const sdk::FlushArgs&) override { write_pending(); }

 private:
  // On a failed write the buffered lines are dropped (and said so): keeping them would
  // grow without bound on a full disk.
  void write_pending() {
    if (pending_.empty()) return;
    std::string batch;
    batch.swap(pending_);
    std::int64_t lines = n_pending_;
    n_pending_ = 0;
    try {
      out_->write(batch);
    } catch (const sdk::Error& e) {
      throw sdk::Error(e.status(),
                       std::string(e.what()) + " (" + std::to_string(lines) + " records dropped)");
    }
  }

  std::unique_ptr<sdk::OutputFile> out_;
  std::string pending_;
  std::int64_t n_pending_ = 0;
  std::int64_t flush_every_ = 0;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::JsonlSink, "jsonl", "1.0.0",
           "one JSON object per record per line (schema loupe.record/1)", loupe::sinks::kKeys)
