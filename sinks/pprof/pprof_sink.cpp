// SPDX-License-Identifier: Apache-2.0
//
// pprof sink: every stack-sample record, whatever plugin made it, as gzip-compressed
// profile.proto files (one per record name), the format go tool pprof, Pyroscope, Parca
// and Google Cloud Profiler read.
#include <map>
#include <string>

#include "gzip.hpp"
#include "loupe/sdk/atomic_file.hpp"
#include "loupe/sdk/plugin.hpp"
#include "profile_builder.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"final_only", LOUPE_CFG_BOOL, 0, "true",
     "profile only end-of-session records (interval reports are often cumulative snapshots)", 0, 0,
     nullptr, 0, 0},
};

class PprofSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    final_only_ = args.config.value_bool("final_only");
    rotating_ = sdk::rotate_seconds(args.session) > 0;
    output_dir_ = args.session && args.session->output_dir ? args.session->output_dir : "";
  }

  void consume(const loupe_record& rec) override {
    if (rec.kind != LOUPE_RECORD_STACK_SAMPLE || !rec.name) return;
    // Interval stack records are deltas: a window's add up to that window alone.
    if (rotating_ && !rec.is_final) window_[rec.name].add(rec);
    if (final_only_ && !rec.is_final) return;
    profiles_[rec.name].add(rec);
  }

  // Files always hold everything profiled so far; each flush rewrites them. A window's
  // files hold the window's samples, and the next window starts empty.
  void flush(const sdk::FlushArgs& args) override {
    if (!args.window_dir.empty()) {
      std::map<std::string, ProfileBuilder> done;
      done.swap(window_);
      write(done, args.window_dir);
      return;
    }
    write(profiles_, output_dir_);
  }

 private:
  static void write(const std::map<std::string, ProfileBuilder>& profiles, const std::string& dir) {
    for (const auto& [name, builder] : profiles) {
      if (builder.samples() == 0) continue;
      sdk::replace_file(sdk::join_path(dir, sdk::file_stem(name) + ".pb.gz"),
                        gzip_compress(builder.serialize()));
    }
  }

  bool final_only_ = true;
  bool rotating_ = false;
  std::string output_dir_;
  std::map<std::string, ProfileBuilder> profiles_;
  std::map<std::string, ProfileBuilder> window_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::PprofSink, "pprof", "1.0.0",
           "gzip-compressed profile.proto (pprof) files from every stack-sample record",
           loupe::sinks::kKeys)
