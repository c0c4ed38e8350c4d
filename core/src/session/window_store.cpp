// SPDX-License-Identifier: Apache-2.0
#include "session/window_store.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <system_error>

#include "session/session_error.hpp"

namespace loupe {
namespace fs = std::filesystem;

Status make_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return session_error(ExitCode::kRuntime,
                         fmt::format("cannot create output directory {}: {}", dir, ec.message()));
  ::chmod(dir.c_str(), 0700);
  return {};
}

namespace {

constexpr const char* kPartialPrefix = ".partial-";

std::uint64_t bytes_under(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

// UTC to the millisecond: `seconds` is strftime's format of the whole seconds.
std::string utc(std::uint64_t wall_ns, const char* seconds) {
  std::time_t secs = static_cast<std::time_t>(wall_ns / 1000000000ULL);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), seconds, &tm);
  return fmt::format("{}.{:03}Z", buf, (wall_ns / 1000000ULL) % 1000);
}

std::string iso_utc(std::uint64_t wall_ns) {
  return utc(wall_ns, "%Y-%m-%dT%H:%M:%S");
}

}  // namespace

std::string WindowStore::name_of(std::uint64_t wall_ns) {
  return utc(wall_ns, "%Y%m%dT%H%M%S");
}

void WindowStore::fail(const std::string& what) {
  ++c_.errors;
  c_.last_error = what;
  spdlog::warn("windows: {}", what);
}

void WindowStore::clean_partial() {
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(kPartialPrefix, 0) == 0)
      fs::remove_all(it->path(), ec);
}

WindowEnd WindowStore::begin(std::uint64_t start_ns, std::uint64_t end_ns) {
  WindowEnd w;
  w.start_ns = start_ns;
  w.end_ns = end_ns;
  std::error_code ec;
  // Made here, not at the start: after `user =` drops root, the session's user writes them.
  fs::create_directories(root_, ec);
  if (ec) {
    fail(fmt::format("cannot create {}: {}", root_.string(), ec.message()));
    return w;
  }
  const fs::path dir = root_ / (kPartialPrefix + name_of(start_ns));
  fs::remove_all(dir, ec);
  if (::mkdir(dir.c_str(), 0700) != 0) {
    fail(fmt::format("cannot create {}: {}", dir.string(), std::strerror(errno)));
    return w;
  }
  w.dir = dir.string();
  return w;
}

fs::path WindowStore::publish(const WindowEnd& w, const std::vector<std::string>& missing) {
  if (w.dir.empty()) return {};
  {
    std::vector<std::string> quoted;
    for (const auto& m : missing) quoted.push_back(fmt::format("\"{}\"", m));
    std::ofstream out(fs::path(w.dir) / "window.json");
    out << fmt::format(
        "{{\"start\": \"{}\", \"end\": \"{}\", \"start_ns\": {}, \"end_ns\": {}, \"missing\": "
        "[{}]}}\n",
        iso_utc(w.start_ns), iso_utc(w.end_ns), w.start_ns, w.end_ns, fmt::join(quoted, ", "));
  }
  const fs::path final_dir = root_ / name_of(w.start_ns);
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // a window of the same start (a clock set back): the newer wins
  fs::rename(w.dir, final_dir, ec);
  if (ec) {
    fail(fmt::format("cannot publish {} as {}: {}", w.dir, final_dir.string(), ec.message()));
    fs::remove_all(w.dir, ec);
    return {};
  }
  ++c_.written;
  if (!missing.empty()) ++c_.incomplete;
  prune();
  return final_dir;
}

void WindowStore::prune() {
  struct Kept {
    fs::path path;
    std::uint64_t bytes;
  };
  std::vector<Kept> kept;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.front() == '.' || !it->is_directory(ec)) continue;
    kept.push_back({it->path(), bytes_under(it->path())});
  }
  std::sort(kept.begin(), kept.end(),
            [](const Kept& a, const Kept& b) { return a.path.filename() < b.path.filename(); });
  std::uint64_t total = 0;
  for (const auto& k : kept) total += k.bytes;
  std::size_t oldest = 0;
  // The newest window always stays: a bound smaller than one window must not leave none.
  while (kept.size() - oldest > 1 && ((retain_ && kept.size() - oldest > retain_) ||
                                      (retain_bytes_ && total > retain_bytes_))) {
    fs::remove_all(kept[oldest].path, ec);
    if (ec) {
      fail(fmt::format("cannot remove {}: {}", kept[oldest].path.string(), ec.message()));
      break;
    }
    total -= kept[oldest].bytes;
    ++c_.pruned;
    ++oldest;
  }
  c_.kept = kept.size() - oldest;
  c_.kept_bytes = total;
}

}  // namespace loupe
