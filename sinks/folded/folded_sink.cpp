// SPDX-License-Identifier: Apache-2.0
//
// folded sink: every stack-sample record, whatever plugin made it, as flamegraph.pl's
// folded stacks ("root;...;leaf value" per line), so each stack-producing profiler gets
// flame graphs (flamegraph.pl, speedscope, inferno) without knowing any of them.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "loupe/sdk/atomic_file.hpp"
#include "loupe/sdk/plugin.hpp"
#include "stack_folder.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"\"",
     "one file for every record (relative to output_dir; \"-\" = stdout); empty = "
     "<output_dir>/<record name>.folded per record name",
     0, 0, nullptr, 0, 0},
    {"value", LOUPE_CFG_STRING, 0, "\"\"",
     "which value of each record is the line's weight (e.g. \"alloc_bytes\"); empty = the first", 0,
     0, nullptr, 0, 0},
    {"include_comm", LOUPE_CFG_BOOL, 0, "false",
     "root each stack at the record's `comm` label, as stackcollapse-perf does", 0, 0, nullptr, 0,
     0},
    {"final_only", LOUPE_CFG_BOOL, 0, "true",
     "fold only end-of-session records (interval reports are often cumulative snapshots)", 0, 0,
     nullptr, 0, 0},
};

void write_all(int fd, std::string_view rest, const char* what) {
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw sdk::Error(LOUPE_ERR_RESOURCE, std::string("folded: write to ") + what +
                                               " failed: " + std::strerror(errno));
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

class FoldedSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    path_ = args.config.value_string("path");
    final_only_ = args.config.value_bool("final_only");
    FoldOptions opts;
    opts.value_name = args.config.value_string("value");
    opts.include_comm = args.config.value_bool("include_comm");
    if (sdk::rotate_seconds(args.session) > 0) window_.emplace(opts);
    folder_.emplace(std::move(opts));
    output_dir_ = args.session && args.session->output_dir ? args.session->output_dir : "";
  }

  void consume(const loupe_record& rec) override {
    if (rec.kind != LOUPE_RECORD_STACK_SAMPLE) return;
    // Interval stack records are deltas: a window's add up to that window alone.
    if (window_ && !rec.is_final) window_->add(rec);
    if (final_only_ && !rec.is_final) return;
    folder_->add(rec);
  }

  // Files always hold everything folded so far; each flush rewrites them. A window's files
  // (named as the session's, in the window's directory; never stdout) hold the window's
  // stacks, and the next window starts empty.
  void flush(const sdk::FlushArgs& args) override {
    if (!args.window_dir.empty()) {
      if (!window_) return;
      const std::string file = path_ == "-" ? std::string() : path_;
      write(window_->by_name(), args.window_dir,
            file.empty() || file.front() == '/' ? std::string() : sdk::file_stem(file));
      window_->clear();
      return;
    }
    if (path_ == "-") {
      if (args.is_final) write_all(STDOUT_FILENO, render_all(folder_->by_name()), "stdout");
      return;
    }
    write(folder_->by_name(), output_dir_, path_);
  }

 private:
  // One file per record name, or all in `file`: with several record names the name is the
  // root frame, so "alloc" and "free" stacks do not add up into one flame.
  static std::string render_all(const StackFolder::ByName& by_name) {
    std::string text;
    for (const auto& [name, stacks] : by_name)
      text += StackFolder::render(stacks, by_name.size() > 1 ? name : std::string());
    return text;
  }
  static void write(const StackFolder::ByName& by_name, const std::string& dir,
                    const std::string& file) {
    if (file.empty()) {
      for (const auto& [name, stacks] : by_name)
        sdk::replace_file(sdk::join_path(dir, sdk::file_stem(name) + ".folded"),
                          StackFolder::render(stacks));
      return;
    }
    sdk::replace_file(sdk::join_path(dir, file), render_all(by_name));
  }

  std::string path_;
  std::string output_dir_;
  bool final_only_ = true;
  std::optional<StackFolder> folder_;
  std::optional<StackFolder> window_;  // [session] rotate: this window's stacks
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::FoldedSink, "folded", "1.0.0",
           "flamegraph.pl folded stacks from every stack-sample record", loupe::sinks::kKeys)
