// SPDX-License-Identifier: Apache-2.0
#include "latency_reporter.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::latency {
namespace {

std::string comm_of(std::uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

LatencyReporter::LatencyReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts,
                                 std::vector<TargetLabels> targets,
                                 std::vector<TargetProbeFile> files)
    : host_(host),
      maps_(maps),
      opts_(opts),
      targets_(std::move(targets)),
      files_(std::move(files)),
      expired_swept_(targets_.size(), 0) {
  files_.resize(targets_.size());
}

LatencyReporter::Swept LatencyReporter::sweep_starts(bool is_final) {
  Swept s{std::vector<std::uint64_t>(targets_.size(), 0),
          std::vector<std::uint64_t>(targets_.size(), 0)};
  std::uint64_t now = host_.now_ns();
  lat_start_key key{}, next{};
  std::vector<lat_start_key> stale;
  bool first = true;
  while (bpf_map_get_next_key(maps_.starts_fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    lat_start_val v{};
    if (bpf_map_lookup_elem(maps_.starts_fd, &key, &v) != 0 || key.target >= targets_.size())
      continue;
    bool old = now > v.ts[0] && now - v.ts[0] > opts_.max_age_ns;
    if (v.depth == 0) {
      // An idle slot the BPF side keeps for the thread's next call; dropping one whose
      // thread stayed away (or died) longer than max_age loses nothing.
      if (old) stale.push_back(key);
    } else if (old) {
      stale.push_back(key);
      ++s.expired[key.target];
    } else {
      ++s.in_flight[key.target];
    }
  }
  // Deleting after the walk keeps get_next_key from restarting at the head.
  for (const auto& k : stale) {
    bpf_map_delete_elem(maps_.starts_fd, &k);
    if (maps_.start_labels_fd >= 0) bpf_map_delete_elem(maps_.start_labels_fd, &k);
  }
  for (std::size_t i = 0; i < targets_.size(); ++i) expired_swept_[i] += s.expired[i];
  (void)is_final;
  return s;
}

lat_counters LatencyReporter::read_counters(std::uint32_t target) const {
  return sdk::read_per_cpu_sum<lat_counters>(maps_.counters_fd, &target);
}

loupe_hist LatencyReporter::read_hist(int fd, const void* key) const {
  return sdk::hist_merge_per_cpu<loupe_hist>(sdk::read_per_cpu<loupe_hist>(fd, key));
}

void LatencyReporter::emit_hist(const std::string& key, const loupe_hist& total,
                                const std::vector<std::pair<std::string, std::string>>& labels) {
  loupe_hist report = total;
  if (!is_final_) {
    auto it = previous_.find(key);
    if (it != previous_.end()) report = sdk::hist_interval_delta(total, it->second, opts_.linear);
    previous_[key] = total;
  }
  sdk::RecordBuilder rb(LOUPE_RECORD_HISTOGRAM, "latency");
  for (const auto& [k, v] : labels) rb.label(k, v);
  rb.final(is_final_).window(window_start_, window_end_);
  sdk::add_histogram(rb, "ns", report, opts_.linear).emit(host_);
}

void LatencyReporter::emit_target(std::uint32_t i, const lat_counters& c, const Swept& swept) {
  const auto& t = targets_[i];
  // The counters are the map's totals: their window is the session so far; `now` is a
  // state at the window's end.
  auto metric = [&](const char* name, loupe_metric_type type, const char* unit, double v,
                    bool now = false) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.label("target", t.name).label("mechanism", t.mechanism);
    rb.final(is_final_).window(now ? window_start_ : session_start_, window_end_);
    rb.metric(type, unit, v).emit(host_);
  };
  std::uint64_t expired = c.expired + expired_swept_[i];
  metric("calls", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.calls));
  if (!files_[i].uprobe_site.empty()) {
    // A uprobe has one site: reported as USDT sites are (interval deltas), named from the file.
    std::uint64_t report = c.calls;
    if (!is_final_) {
      auto& prev = previous_counts_["u/" + std::to_string(i)];
      report = c.calls - prev;
      prev = c.calls;
    }
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, "site_calls");
    rb.label("target", t.name).label("mechanism", t.mechanism);
    rb.label("site", files_[i].uprobe_site).label("module", files_[i].binary);
    rb.final(is_final_).window(window_start_, window_end_);
    rb.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(report)).emit(host_);
  }
  if (t.count_only) {
    // A single probe: how often it fired is all there is; pairing figures would be noise.
    if (is_final_ && c.calls == 0) emit_silent(i);
    if (maps_.site_counts_fd >= 0 && !files_[i].sites.empty()) emit_site_health(i, c);
    if (!t.label.empty()) emit_label_health(i, c);
    return;
  }
  metric("matched", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.matched));
  metric("unmatched_exits", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.unmatched_exits));
  metric("expired", LOUPE_METRIC_COUNTER, "count", static_cast<double>(expired));
  metric("discarded", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.discarded));
  metric("below_min", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.below_min));
  metric("depth_overflow", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.depth_overflow));
  metric("outliers", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.outliers));
  metric("in_flight", LOUPE_METRIC_GAUGE, "count", static_cast<double>(swept.in_flight[i]), true);
  if (c.calls)
    metric("match_rate", LOUPE_METRIC_GAUGE, "ratio",
           static_cast<double>(c.matched) / static_cast<double>(c.calls));

  auto health = [&](const char* name, std::uint64_t v, loupe_health_severity bad,
                    const std::string& why) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, name);
    rb.label("target", t.name).label("mechanism", t.mechanism);
    rb.final(is_final_).window(window_start_, window_end_);
    rb.health(v ? bad : LOUPE_HEALTH_OK, "latency/" + t.name, v, v ? why : std::string());
    rb.emit(host_);
  };
  health("unmatched_exits", c.unmatched_exits, LOUPE_HEALTH_WARN,
         "exits without a recorded entry on a thread whose calls were paired before: entries "
         "lost");
  health("began_before_attach", c.began_before_attach, LOUPE_HEALTH_OK,
         "calls in flight when tracing began (at most one per thread): their exits came "
         "without an entry; not loss");
  health("expired", expired, LOUPE_HEALTH_WARN,
         "entries older than max_age_ms dropped: their exits never came");
  health("discarded", c.discarded, LOUPE_HEALTH_WARN,
         "impossible durations (negative or above max_age_ms) not recorded");
  health("map_full", c.map_full, LOUPE_HEALTH_WARN,
         "the correlation map was full (entries, or the labels of open USDT entries, not "
         "kept): raise max_entries");
  if (opts_.per_pid || opts_.per_comm)
    health("breakdown_overflow", c.breakdown_overflow, LOUPE_HEALTH_WARN,
           "calls of processes/commands beyond breakdown_limit = " +
               std::to_string(opts_.breakdown_limit) +
               " per-pid/per-comm histograms are in the target total only: raise "
               "breakdown_limit");
  if (c.outliers_sampled_out)
    health("outliers_sampled_out", c.outliers_sampled_out, LOUPE_HEALTH_WARN,
           "outlier events skipped under ring backpressure (1-in-N sampling)");
  if (maps_.site_counts_fd >= 0 && !files_[i].sites.empty()) emit_site_health(i, c);
  if (!t.label.empty()) emit_label_health(i, c);
  if (is_final_ && c.calls == 0 && c.unmatched_exits == 0 && c.began_before_attach == 0)
    emit_silent(i);
}

void LatencyReporter::emit_health(std::uint32_t i, const char* name, std::uint64_t v,
                                  const std::string& why) {
  const auto& t = targets_[i];
  sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, name);
  rb.label("target", t.name).label("mechanism", t.mechanism);
  rb.final(is_final_).window(window_start_, window_end_);
  rb.health(v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "latency/" + t.name, v,
            v ? why : std::string());
  rb.emit(host_);
}

void LatencyReporter::emit_label_health(std::uint32_t i, const lat_counters& c) {
  emit_health(i, "label_overflow", c.label_overflow,
              "calls whose " + targets_[i].label +
                  " value came after breakdown_limit = " + std::to_string(opts_.breakdown_limit) +
                  " distinct values are in the target total only: raise breakdown_limit");
  emit_health(i, "label_unreadable", c.label_unreadable,
              "calls whose " + targets_[i].label +
                  " argument could not be read (its string pointer was not readable): pairs "
                  "timed under the empty value, single probes in the target total only");
}

// Per-site counts: every call is in one site's count, "?" when its site could not be told,
// or in sites_lost when the per-site map refused it (the notes lacked a site that fired).
void LatencyReporter::emit_site_health(std::uint32_t i, const lat_counters& c) {
  emit_health(i, "site_unresolved", c.site_unresolved,
              "calls whose site could not be told (the process's memory map was locked by "
              "another of its threads): counted under site \"?\"");
  emit_health(i, "sites_lost", c.sites_lost,
              "calls at sites the probe's notes do not list: in the target total only");
}

namespace {
std::string joined(const std::vector<std::string>& v, std::size_t max) {
  std::string out;
  for (std::size_t k = 0; k < v.size() && k < max; ++k) out += (k ? ", " : "") + v[k];
  if (v.size() > max) out += " and " + std::to_string(v.size() - max) + " more";
  return out;
}
}  // namespace

// A probe that never fired: said with what the target did run, so a probe on a binary the
// target never ran (a python3 that is not the probed /usr/bin/python3.11) is told apart
// from a code path that was not reached.
void LatencyReporter::emit_silent(std::uint32_t i) {
  const auto& t = targets_[i];
  const auto& f = files_[i];
  std::string name = "silent_probe";
  std::string why = "the probe never fired for this target (never reached, or filtered out)";
  if (!f.binary.empty() && maps_.execs_fd >= 0) {
    std::vector<std::string> ran;
    bool ran_probed = false;
    for (const auto& [ino, path] : opts_.running) {
      ran_probed |= ino == f.ino;
      ran.push_back(path);
    }
    lat_exec_key key{}, next{};
    bool first = true;
    while (bpf_map_get_next_key(maps_.execs_fd, first ? nullptr : &key, &next) == 0) {
      first = false;
      key = next;
      lat_exec_val v{};
      if (bpf_map_lookup_elem(maps_.execs_fd, &key, &v) != 0) continue;
      // By inode alone: the kernel's device numbering of a superblock and stat()'s can
      // differ (overlay, btrfs subvolumes); two files on two filesystems sharing an inode
      // number would only turn this warning into the plain one.
      if (key.ino == f.ino) ran_probed = true;
      std::string path(v.path, strnlen(v.path, sizeof(v.path)));
      // The file behind a link (python3 -> python3.11) is the one to probe; a relative path
      // was the exec's, whose working directory is not ours.
      if (char* real = path.starts_with('/') ? ::realpath(path.c_str(), nullptr) : nullptr) {
        if (path != real) path += " (" + std::string(real) + ")";
        std::free(real);
      }
      ran.push_back(path);
    }
    std::sort(ran.begin(), ran.end());
    if (!ran.empty() && !ran_probed) {
      const std::string what =
          "the target ran " + joined(ran, 5) + "; the probes sit on " + f.binary;
      if (f.program) {
        name = "unmapped_binary";
        why = what +
              ", which no target process ran: the probes never fired (probe the file the "
              "target runs instead; `loupe probes FILE` lists its probes)";
      } else {
        why = "the probe never fired: " + what +
              " (a library none of them loaded, or whose probed code was not reached)";
      }
    } else if (ran_probed) {
      why = "the probe never fired though the target ran " + f.binary +
            " (never reached, or filtered out)";
    }
  }
  sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, name.c_str());
  rb.label("target", t.name).label("mechanism", t.mechanism);
  rb.final(true).window(window_start_, window_end_);
  // A probe on a file the target never ran is a mistake to fix (WARN); one that was not
  // reached is information, listed apart from loss by the reports.
  rb.health(name == "unmapped_binary" ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "latency/" + t.name, 1,
            why);
  rb.emit(host_);
}

void LatencyReporter::emit_execs_lost() {
  const std::uint32_t zero = 0;
  const auto lost = sdk::read_per_cpu_sum<std::uint64_t>(maps_.execs_lost_fd, &zero);
  sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "execs_lost");
  rb.final(is_final_).window(window_start_, window_end_);
  rb.health(lost ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "latency/execs", lost,
            lost ? "execs of the target not recorded (more than " + std::to_string(LAT_MAX_EXECS) +
                       " distinct executables): a silent probe's report names fewer of them"
                 : std::string());
  rb.emit(host_);
}

void LatencyReporter::emit_breakdown() {
  lat_breakdown_key key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(maps_.breakdown_fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    if (key.target >= targets_.size()) continue;
    loupe_hist h = read_hist(maps_.breakdown_fd, &key);
    const auto& t = targets_[key.target];
    std::vector<std::pair<std::string, std::string>> labels = {{"target", t.name},
                                                               {"mechanism", t.mechanism}};
    std::string id = "b/" + std::to_string(key.target);
    if (opts_.per_pid) {
      labels.emplace_back("pid", std::to_string(key.pid));
      id += "/" + std::to_string(key.pid);
    }
    std::string comm =
        opts_.per_comm ? std::string(key.comm, strnlen(key.comm, LAT_COMM_LEN)) : comm_of(key.pid);
    if (!comm.empty()) labels.emplace_back("comm", comm);
    if (opts_.per_comm) id += "/" + comm;
    emit_hist(id, h, labels);
  }
}

namespace {
std::string fmt_hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string label_text(const lat_label& l, bool is_string) {
  return is_string ? std::string(l.str, strnlen(l.str, LAT_LABEL_LEN)) : std::to_string(l.num);
}
}  // namespace

// Per USDT-argument label: a histogram per value for pairs, a count per value for single
// probes (interval reports carry deltas like the target totals).
void LatencyReporter::emit_labels() {
  for (int fd : {maps_.label_hists_fd, maps_.label_counts_fd}) {
    lat_label_key key{}, next{};
    bool first = true;
    while (bpf_map_get_next_key(fd, first ? nullptr : &key, &next) == 0) {
      first = false;
      key = next;
      if (key.target >= targets_.size()) continue;
      const auto& t = targets_[key.target];
      const std::string value = label_text(key.label, t.label_string);
      std::vector<std::pair<std::string, std::string>> labels = {
          {"target", t.name}, {"mechanism", t.mechanism}, {t.label, value}};
      const std::string id = "l/" + std::to_string(key.target) + "/" + value;
      if (fd == maps_.label_hists_fd) {
        emit_hist(id, read_hist(fd, &key), labels);
        continue;
      }
      auto total = sdk::read_per_cpu_sum<std::uint64_t>(fd, &key);
      std::uint64_t report = total;
      if (!is_final_) {
        auto& prev = previous_counts_[id];
        report = total - prev;
        prev = total;
      }
      sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, "calls");
      for (const auto& [k, v] : labels) rb.label(k, v);
      rb.final(is_final_).window(window_start_, window_end_);
      rb.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(report)).emit(host_);
    }
  }
}

// USDT calls per site, summed in the kernel over every process that fired it; each site
// named when it was attached (its function and offset in the probed file), and every
// attached site reported, those that never fired with 0.
void LatencyReporter::emit_sites() {
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> totals;  // (target, offset)
  for (std::uint32_t i = 0; i < files_.size(); ++i)
    for (const auto& [off, name] : files_[i].sites) totals[{i, off}] = 0;
  lat_site_key key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(maps_.site_counts_fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    if (key.target >= targets_.size()) continue;
    totals[{key.target, key.file_offset}] =
        sdk::read_per_cpu_sum<std::uint64_t>(maps_.site_counts_fd, &key);
  }
  for (const auto& [k, total] : totals) {
    const auto& t = targets_[k.first];
    const auto& f = files_[k.first];
    auto named = f.sites.find(k.second);
    const std::string site = named != f.sites.end()         ? named->second
                             : k.second == LAT_SITE_UNKNOWN ? std::string("?")
                                                            : "file+0x" + fmt_hex(k.second);
    const std::string id = "s/" + std::to_string(k.first) + "/" + fmt_hex(k.second);
    std::uint64_t report = total;
    if (!is_final_) {
      auto& prev = previous_counts_[id];
      report = total - prev;
      prev = total;
    }
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, "site_calls");
    rb.label("target", t.name).label("mechanism", t.mechanism).label("site", site);
    if (!f.binary.empty()) rb.label("module", f.binary);
    rb.final(is_final_).window(window_start_, window_end_);
    rb.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(report)).emit(host_);
  }
}

void LatencyReporter::collect(bool is_final, std::uint64_t window_start_ns,
                              std::uint64_t window_end_ns) {
  is_final_ = is_final;
  window_start_ = window_start_ns;
  window_end_ = window_end_ns;
  if (!session_start_) session_start_ = window_start_ns;  // the first window starts the session
  Swept swept = sweep_starts(is_final);
  for (std::uint32_t i = 0; i < targets_.size(); ++i) {
    loupe_hist h = read_hist(maps_.hists_fd, &i);
    if (!targets_[i].count_only)
      emit_hist("t/" + std::to_string(i), h,
                {{"target", targets_[i].name}, {"mechanism", targets_[i].mechanism}});
    emit_target(i, read_counters(i), swept);
  }
  if (maps_.breakdown_fd >= 0) emit_breakdown();
  if (maps_.label_hists_fd >= 0) emit_labels();
  if (maps_.site_counts_fd >= 0) emit_sites();
  if (maps_.execs_lost_fd >= 0) emit_execs_lost();
}

}  // namespace loupe::latency
