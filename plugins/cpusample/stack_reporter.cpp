// SPDX-License-Identifier: Apache-2.0
#include "stack_reporter.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstring>

#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::cpusample {
namespace {

std::string key_bytes(const cs_key& k) {
  return std::string(reinterpret_cast<const char*>(&k), sizeof(k));
}

std::string comm_of(const cs_key& k) {
  return std::string(k.comm, strnlen(k.comm, sizeof(k.comm)));
}

}  // namespace

StackReporter::StackReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts)
    : host_(host), maps_(maps), opts_(std::move(opts)) {}

std::vector<std::pair<cs_key, std::uint64_t>> StackReporter::read_counts() const {
  std::vector<std::pair<cs_key, std::uint64_t>> out;
  cs_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(maps_.counts_fd, prev, &next) == 0) {
    std::uint64_t v = 0;
    if (bpf_map_lookup_elem(maps_.counts_fd, &next, &v) == 0) out.emplace_back(next, v);
    key = next;
    prev = &key;
  }
  return out;
}

std::vector<std::uint64_t> StackReporter::stack_addresses(std::int32_t stack_id) const {
  std::vector<std::uint64_t> ips(CS_MAX_STACK_DEPTH, 0);
  if (stack_id < 0 || bpf_map_lookup_elem(maps_.stacks_fd, &stack_id, ips.data()) != 0) return {};
  std::size_t n = 0;
  while (n < ips.size() && ips[n] != 0) ++n;
  ips.resize(n);
  return ips;
}

const StackReporter::Frames& StackReporter::user_frames(std::uint32_t tgid, std::int32_t stack_id) {
  auto [it, inserted] = user_cache_.try_emplace({tgid, stack_id});
  if (inserted) {
    auto ips = stack_addresses(stack_id);
    it->second.resize(ips.size());
    if (!ips.empty())
      host_.symbolize(tgid, LOUPE_FRAME_USER, ips.data(), static_cast<std::uint32_t>(ips.size()),
                      it->second.data());
  }
  return it->second;
}

const StackReporter::Frames& StackReporter::kernel_frames(std::int32_t stack_id) {
  auto [it, inserted] = kernel_cache_.try_emplace(stack_id);
  if (inserted) {
    auto ips = stack_addresses(stack_id);
    it->second.resize(ips.size());
    if (!ips.empty())
      host_.symbolize(0, LOUPE_FRAME_KERNEL, ips.data(), static_cast<std::uint32_t>(ips.size()),
                      it->second.data());
  }
  return it->second;
}

void StackReporter::warm() {
  auto counts = read_counts();
  std::lock_guard lock(mu_);
  for (const auto& [k, v] : counts) {
    if (k.user_stack_id >= 0) user_frames(k.tgid, k.user_stack_id);
    if (k.kernel_stack_id >= 0) kernel_frames(k.kernel_stack_id);
  }
}

cs_counters StackReporter::read_counters() const {
  std::uint32_t zero = 0;
  return sdk::read_per_cpu_sum<cs_counters>(maps_.counters_fd, &zero);
}

void StackReporter::collect(bool is_final, std::uint64_t ws, std::uint64_t we) {
  auto counts = read_counts();
  std::lock_guard lock(mu_);
  std::uint64_t truncated = 0;
  for (const auto& [k, total] : counts) {
    std::uint64_t value = total;
    const std::string kb = key_bytes(k);
    if (!is_final) {
      // Interval reports are deltas; the final report is the whole session.
      std::uint64_t& prev = previous_[kb];
      value = total - std::min(prev, total);
      prev = total;
    }
    Frames frames;
    if (k.kernel_stack_id >= 0) {
      const auto& kf = kernel_frames(k.kernel_stack_id);
      if (kf.size() >= CS_MAX_STACK_DEPTH) truncated += total;
      frames.insert(frames.end(), kf.begin(), kf.end());
    }
    if (k.user_stack_id >= 0) {
      const auto& uf = user_frames(k.tgid, k.user_stack_id);
      if (uf.size() >= CS_MAX_STACK_DEPTH) truncated += total;
      frames.insert(frames.end(), uf.begin(), uf.end());
    }
    if (value == 0) continue;
    sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, opts_.record_name);
    rb.label("pid", std::to_string(k.tgid)).label("comm", comm_of(k));
    if (opts_.per_thread) rb.label("tid", std::to_string(k.pid));
    rb.final(is_final).window(ws, we);
    rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
    rb.value("samples", "count", static_cast<std::int64_t>(value));
    rb.emit(host_);
  }
  emit_health(read_counters(), truncated, is_final, ws, we);
}

void StackReporter::emit_health(const cs_counters& c, std::uint64_t truncated, bool is_final,
                                std::uint64_t ws, std::uint64_t we) {
  auto metric = [&](const char* name, double v, loupe_metric_type type = LOUPE_METRIC_COUNTER) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.final(is_final).window(ws, we).metric(type, "count", v).emit(host_);
  };
  metric("samples", static_cast<double>(c.samples));
  metric("samples_idle", static_cast<double>(c.idle));
  metric("samples_filtered_out", static_cast<double>(c.filtered));

  struct Row {
    const char* component;
    std::uint64_t value;
    const char* message;
  };
  const Row rows[] = {
      {"cpusample/user_stack_efault", c.user_efault,
       "user stacks that could not be read (page not resident, no frame pointers)"},
      {"cpusample/user_stack_eexist", c.user_eexist,
       "user stacks dropped: stack map full or hash collision (raise max_stacks)"},
      {"cpusample/user_stack_error", c.user_other, "user stacks failed for another reason"},
      {"cpusample/kernel_stack_efault", c.kernel_efault,
       "kernel-mode samples without a kernel stack"},
      {"cpusample/kernel_stack_eexist", c.kernel_eexist,
       "kernel stacks dropped: stack map full or hash collision (raise max_stacks)"},
      {"cpusample/kernel_stack_error", c.kernel_other, "kernel stacks failed for another reason"},
      {"cpusample/counts_full", c.counts_full,
       "samples lost: the aggregation map is full (raise max_keys)"},
      {"cpusample/truncated_stacks", truncated,
       "samples whose stack reached the depth limit (127 frames) and lost its root"},
  };
  for (const auto& r : rows) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "stacks");
    rb.final(is_final).window(ws, we);
    rb.health(r.value ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, r.component, r.value, r.message);
    rb.emit(host_);
  }
  if (is_final && c.samples == 0) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "silent_probe");
    rb.final(true).window(ws, we);
    rb.health(LOUPE_HEALTH_WARN, "cpusample", 1,
              "no sample was counted (the target ran for less than a sampling period, was "
              "idle, or was filtered out)");
    rb.emit(host_);
  }
}

}  // namespace loupe::cpusample
