// SPDX-License-Identifier: Apache-2.0
//
// The user frames of one stack as the jsonl sink writes it (an event's "frames" or a stack
// record's), for tests that assert which function made a call: the leaf, the first frame
// outside libc (the caller of a libc wrapper), and whether the stack reaches its root.
#ifndef LOUPE_TESTS_USER_FRAMES_HPP
#define LOUPE_TESTS_USER_FRAMES_HPP

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

namespace loupe::test {

struct UserFrames {
  std::vector<std::string> symbols;  // leaf first; "?" where unresolved
  std::vector<std::string> modules;
  std::vector<std::string> unresolved;  // "?" frames: module and resolution, for messages

  explicit UserFrames(const nlohmann::json& frames) {
    for (const auto& f : frames) {
      if (f.value("kind", "") != "user") continue;
      symbols.push_back(
          f.contains("symbol") && f["symbol"].is_string() ? f["symbol"].get<std::string>() : "?");
      modules.push_back(
          f.contains("module") && f["module"].is_string() ? f["module"].get<std::string>() : "");
      if (symbols.back() == "?")
        unresolved.push_back((modules.back().empty() ? "(no module)" : modules.back()) + " " +
                             f.value("resolution", ""));
    }
  }
  std::string leaf() const { return symbols.empty() ? "" : symbols.front(); }
  // The function that called into libc: the first frame whose module is not libc.
  std::string caller() const {
    for (std::size_t i = 0; i < symbols.size(); ++i)
      if (modules[i].find("libc.so") == std::string::npos) return symbols[i];
    return "";
  }
  bool reaches(const std::string& root) const {
    for (const auto& s : symbols)
      if (s == root) return true;
    return false;
  }
  // Leaf first, ";" after each; the first unresolved frame's module and why, if any.
  std::string joined() const {
    std::string out;
    for (const auto& s : symbols) out += s + ";";
    if (!unresolved.empty()) out += " (first '?': " + unresolved.front() + ")";
    return out;
  }
};

// The event records named `name` of a run (events are not final records).
inline std::vector<const nlohmann::json*> events(const std::vector<nlohmann::json>& records,
                                                 const std::string& name) {
  std::vector<const nlohmann::json*> out;
  for (const auto& r : records)
    if (r.value("kind", "") == "event" && r.value("name", "") == name) out.push_back(&r);
  return out;
}

// The value of the final metric record `name` of a run (0 when absent): e.g. a plugin's
// unwind_fp_only_stacks, the stacks walked before the host had loaded their process's tables.
inline double final_metric(const std::vector<nlohmann::json>& records, const std::string& name) {
  for (const auto& r : records)
    if (r.value("kind", "") == "metric" && r.value("name", "") == name &&
        r.value("is_final", false))
      return r["metric"].value("value", 0.0);
  return 0;
}

// Every user stack the in-kernel unwinder cut and said why (sdk::emit_unwind_health): walked
// by frame pointers from a frame no table covered, stopped at a frame it does not follow,
// at a signal trampoline, at an unreadable or impossible frame, or at its depth bound.
inline double counted_cut_stacks(const std::vector<nlohmann::json>& records) {
  double n = final_metric(records, "unwind_fp_only_stacks");
  for (const auto& r : records) {
    if (r.value("kind", "") != "health" || r.value("name", "") != "stacks" ||
        !r.value("is_final", false))
      continue;
    const std::string c = r["health"].value("component", "");
    for (const char* why : {"/unwind_depth_bound", "/unwind_unsupported", "/unwind_signal_frames",
                            "/unwind_read_failed", "/unwind_bad_frame", "/unwind_event_cut"})
      if (c.size() > std::strlen(why) &&
          c.compare(c.size() - std::strlen(why), std::string::npos, why) == 0)
        n += r["health"].value("value", 0.0);
  }
  return n;
}

// A frame's string field ("" when absent or null: a frame the symbolizer could not name).
inline std::string frame_str(const nlohmann::json& f, const char* key) {
  return f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : "";
}

// A stack that is whole and still has no main: the dynamic loader's start-up (its outermost
// frame is ld.so's entry), exit handlers (exit called by __libc_start_call_main after main
// returned), or a sample with no user frames at all (the kernel's side of exec). Such a
// stack is right; it is not an unwinding loss to be counted.
inline bool whole_outside_main(const nlohmann::json& frames) {
  const nlohmann::json* outermost = nullptr;
  std::string callee;  // the symbol of the frame below the outermost (ld.so's _start is
                       // unnamed where its .symtab is gone: it is the one that calls _dl_start)
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (frame_str(frames[i], "module") == "[kernel]") continue;
    if (outermost != nullptr) callee = frame_str(*outermost, "symbol");
    outermost = &frames[i];
    if (i + 1 < frames.size() && frame_str(frames[i], "symbol") == "exit" &&
        frame_str(frames[i + 1], "symbol") == "__libc_start_call_main")
      return true;
  }
  if (outermost == nullptr) return true;
  const std::string module = frame_str(*outermost, "module");
  const std::string symbol = frame_str(*outermost, "symbol");
  return module.find("/ld-linux") != std::string::npos &&
         (symbol == "_start" || symbol == "_dl_start_user" || callee == "_dl_start");
}

// The unwinder's final counters and the table builder's of a run, "name=value ...": what a
// failing unwinder test prints, so that the next failure says which way its stacks went.
inline std::string unwind_counters(const std::vector<nlohmann::json>& records) {
  std::string out;
  for (const auto& r : records) {
    if (!r.value("is_final", false)) continue;
    const std::string name = r.value("name", "");
    std::string what;
    double v = 0;
    if (r.value("kind", "") == "metric" && name.rfind("unwind_", 0) == 0) {
      what = name;
      v = r["metric"].value("value", 0.0);
    } else if (r.value("kind", "") == "health" && r.contains("health")) {
      const std::string c = r["health"].value("component", "");
      if (c.find("unwind") == std::string::npos && name.find("unwind") == std::string::npos)
        continue;
      what = c.find('/') != std::string::npos ? c : name;
      v = r["health"].value("value", 0.0);
      if (r["health"]["message"].is_string())
        what += "(" + r["health"]["message"].get<std::string>() + ")";
    }
    if (!what.empty()) out += " " + what + "=" + std::to_string(static_cast<long long>(v));
  }
  return out.empty() ? " (none)" : out;
}

// What tests/unwind/slow_calls_workload counted, by "site.function": its slow calls, and
// how many of them were near the threshold (ones a profiler timing inside the kernel may
// rightly not see as slow). pid 0 when the workload's line is missing from `output`.
struct SlowCalls {
  long pid = 0;
  std::map<std::string, long> slow, near;

  explicit SlowCalls(const std::string& output) {
    static const std::regex kFigure("([A-Za-z_][A-Za-z_0-9.]*)=([0-9]+)");
    const auto at = output.find("settle.nanosleep=");
    if (at == std::string::npos) return;
    const std::string line =
        output.substr(output.rfind('\n', at) + 1, output.find('\n', at) - output.rfind('\n', at));
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kFigure);
         it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      const long n = std::stol((*it)[2]);
      if (name == "pid")
        pid = n;
      else if (name.size() > 5 && name.compare(name.size() - 5, 5, ".near") == 0)
        near[name.substr(0, name.size() - 5)] = n;
      else
        slow[name] = n;
    }
  }

  // `got` (events per "site.function", `events` in all) against the workload's counts: per
  // key within [slow - near, slow], no event under any other key, and the designed slow
  // calls all there (20 of each, the first write and a read behind its byte may be quick).
  // `skipped`: events the plugin counted as not sent (sampled out under ring backpressure),
  // which may be any site's.
  void expect_matches(const std::map<std::string, long>& got, long events, long skipped = 0) const {
    long low = 0, high = 0;
    for (const auto& [key, n] : slow) {
      const long g = got.count(key) ? got.at(key) : 0, nr = near.count(key) ? near.at(key) : 0;
      EXPECT_LE(g, n) << key;
      EXPECT_GE(g + skipped, n - nr)
          << key << " (" << nr << " near the threshold, " << skipped << " skipped)";
      low += n - nr;
      high += n;
    }
    EXPECT_GE(events + skipped, low);
    EXPECT_LE(events, high) << "events under a function that is not a site";
    for (const auto& [key, g] : got) EXPECT_EQ(slow.count(key), 1U) << "not a site: " << key;
  }
};

}  // namespace loupe::test

#endif  // LOUPE_TESTS_USER_FRAMES_HPP
