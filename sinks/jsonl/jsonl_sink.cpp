// SPDX-License-Identifier: Apache-2.0
//
// jsonl sink: one JSON object per record per line (schema in docs/records.md), for jq,
// pandas and anything that reads newline-delimited JSON.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "loupe/sdk/atomic_file.hpp"
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

// Lines wait for the host's flush (one write per interval), but not beyond a bound: a final
// report of a large process tree is tens of MB of JSON, which would otherwise sit in memory
// twice (here and in the records) before it reaches the disk.
class LineStream {
 public:
  void open(const std::string& path, const char* dir) {
    out_ = std::make_unique<sdk::OutputFile>(path, dir, "jsonl");
  }
  bool is_open() const { return out_ != nullptr; }
  const std::string& path() const { return out_->path(); }
  void add(const loupe_record& rec, std::int64_t flush_every) {
    pending_ += record_to_line(rec);
    pending_ += '\n';
    ++n_pending_;
    if (pending_.size() >= kMaxPendingBytes || (flush_every > 0 && n_pending_ >= flush_every))
      write_pending();
  }
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
  void close() { out_.reset(); }

 private:
  std::unique_ptr<sdk::OutputFile> out_;
  std::string pending_;
  std::int64_t n_pending_ = 0;
};

class JsonlSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    path_ = args.config.value_string("path");
    flush_every_ = args.config.value_int("flush_every");
    if (flush_every_ < 0)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                       "jsonl: flush_every must be >= 0, got " + std::to_string(flush_every_));
    dir_ = args.session && args.session->output_dir ? args.session->output_dir : "";
    // [session] rotate: interval records go to the window's file, moved into the window's
    // directory when it ends; the session file keeps the final report. stdout stays one
    // stream.
    rotating_ = sdk::rotate_seconds(args.session) > 0 && path_ != "-";
    session_.open(path_, dir_.c_str());
  }

  void consume(const loupe_record& rec) override {
    if (!rotating_ || rec.is_final) return session_.add(rec, flush_every_);
    if (!window_.is_open()) window_.open("." + sdk::file_stem(path_) + ".window", dir_.c_str());
    window_.add(rec, flush_every_);
  }

  void flush(const sdk::FlushArgs& args) override {
    session_.write_pending();
    if (!window_.is_open()) return;
    window_.write_pending();
    if (args.window_dir.empty()) return;
    const std::string from = window_.path();
    window_.close();
    const std::string to = sdk::join_path(args.window_dir, sdk::file_stem(path_));
    if (::rename(from.c_str(), to.c_str()) != 0)
      throw sdk::Error(LOUPE_ERR_RESOURCE, "jsonl: cannot move '" + from + "' to '" + to +
                                               "': " + std::strerror(errno));
  }

 private:
  std::string path_;
  std::string dir_;
  bool rotating_ = false;
  std::int64_t flush_every_ = 0;
  LineStream session_;
  LineStream window_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::JsonlSink, "jsonl", "1.0.0",
           "one JSON object per record per line (schema loupe.record/1)", loupe::sinks::kKeys)
