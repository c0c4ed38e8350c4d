// SPDX-License-Identifier: Apache-2.0
//
// folded sink: every stack-sample record, whatever plugin made it, as flamegraph.pl's
// folded stacks ("root;...;leaf value" per line), so each stack-producing profiler gets
// flame graphs (flamegraph.pl, speedscope, inferno) without knowing any of them.
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

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

// Record names become file names: keep them to a safe alphabet.
std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (out.empty() || out.front() == '.') out.insert(out.begin(), '_');
  return out;
}

std::string join(const char* dir, const std::string& file) {
  if (!file.empty() && file.front() == '/') return file;
  if (!dir || !*dir) return file;
  std::string d = dir;
  if (d.back() != '/') d += '/';
  return d + file;
}

void write_all(int fd, const std::string& text, const std::string& path) {
  std::string_view rest(text);
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw sdk::Error(LOUPE_ERR_RESOURCE,
                       "folded: write to '" + path + "' failed: " + std::strerror(errno));
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Written whole and renamed into place, so a reader (or a crash) never sees half a file.
void replace_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw sdk::Error(errno == EACCES || errno == EPERM ? LOUPE_ERR_PERMISSION : LOUPE_ERR_RESOURCE,
                     "folded: cannot open '" + tmp + "' for writing: " + std::strerror(errno));
  try {
    write_all(fd, text, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw sdk::Error(LOUPE_ERR_RESOURCE, "folded: cannot rename '" + tmp + "' to '" + path +
                                             "': " + std::strerror(errno));
}

class FoldedSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    path_ = args.config.value_string("path");
    final_only_ = args.config.value_bool("final_only");
    FoldOptions opts;
    opts.value_name = args.config.value_string("value");
    opts.include_comm = args.config.value_bool("include_comm");
    folder_.emplace(std::move(opts));
    output_dir_ = args.session && args.session->output_dir ? args.session->output_dir : "";
  }

  void consume(const loupe_record& rec) override {
    if (rec.kind != LOUPE_RECORD_STACK_SAMPLE) return;
    if (final_only_ && !rec.is_final) return;
    folder_->add(rec);
  }

  // Files always hold everything folded so far; each flush rewrites them.
  void flush(const sdk::FlushArgs& args) override {
    const auto& by_name = folder_->by_name();
    if (path_.empty()) {
      for (const auto& [name, stacks] : by_name)
        replace_file(join(output_dir_.c_str(), file_stem(name) + ".folded"),
                     StackFolder::render(stacks));
      return;
    }
    // One file for all: with several record names the name is the root frame, so
    // "alloc" and "free" stacks do not add up into one flame.
    std::string text;
    for (const auto& [name, stacks] : by_name)
      text += StackFolder::render(stacks, by_name.size() > 1 ? name : std::string());
    if (path_ == "-") {
      if (args.is_final) write_all(STDOUT_FILENO, text, "stdout");
      return;
    }
    replace_file(join(output_dir_.c_str(), path_), text);
  }

 private:
  std::string path_;
  std::string output_dir_;
  bool final_only_ = true;
  std::optional<StackFolder> folder_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::FoldedSink, "folded", "1.0.0",
           "flamegraph.pl folded stacks from every stack-sample record", loupe::sinks::kKeys)
