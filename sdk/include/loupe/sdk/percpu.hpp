// SPDX-License-Identifier: Apache-2.0
//
// Reading per-CPU maps (PERCPU_ARRAY / PERCPU_HASH): one value per possible CPU, and the
// counters structs every profiler keeps summed over the CPUs. histogram.hpp merges
// per-CPU histograms on top of this.
//
//   lat_counters c = sdk::read_per_cpu_sum<lat_counters>(bpf_map__fd(skel->maps.counters), &i);
#ifndef LOUPE_SDK_PERCPU_HPP
#define LOUPE_SDK_PERCPU_HPP

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace loupe::sdk {

// One entry of a per-CPU map (PERCPU_ARRAY / PERCPU_HASH), one value per possible CPU;
// empty when the key is absent or the lookup fails.
template <typename V>
std::vector<V> read_per_cpu(int map_fd, const void* key) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return {};
  std::vector<V> per_cpu(static_cast<std::size_t>(ncpu));
  if (bpf_map_lookup_elem(map_fd, key, per_cpu.data()) != 0) return {};
  return per_cpu;
}

// One entry of a per-CPU map of counters summed over the CPUs: V is a __u64 or a struct of
// __u64 counters only (the BPF side's counter structs), summed field by field. Zero when
// the key is absent.
template <typename V>
V read_per_cpu_sum(int map_fd, const void* key) {
  static_assert(std::is_trivially_copyable_v<V> && sizeof(V) % sizeof(std::uint64_t) == 0 &&
                    alignof(V) == alignof(std::uint64_t),
                "read_per_cpu_sum sums structs of __u64 counters");
  constexpr std::size_t kWords = sizeof(V) / sizeof(std::uint64_t);
  std::uint64_t sum[kWords] = {};
  for (const V& v : read_per_cpu<V>(map_fd, key)) {
    std::uint64_t words[kWords];
    std::memcpy(words, &v, sizeof(V));
    for (std::size_t i = 0; i < kWords; ++i) sum[i] += words[i];
  }
  V out;
  std::memcpy(&out, sum, sizeof(V));
  return out;
}

// Reads every (key, value) of a hash map; entries added or removed meanwhile may be
// missed or seen once, which a snapshot of a live map cannot avoid. In batches of 512
// (BPF_MAP_LOOKUP_BATCH: one syscall per batch, where a key at a time takes two per entry;
// a profiler's warm-up pass read its whole counts map four times a second under process
// churn); one key at a time where the kernel has no batch for the map.
template <typename K, typename V, typename Fn>
void for_each_entry(int fd, Fn&& fn) {
  constexpr __u32 kBatch = 512;
  std::vector<K> keys(kBatch);
  std::vector<V> values(kBatch);
  std::vector<std::pair<K, V>> got;
  // The kernel's position between batches: a bucket index for hashes, a key for arrays.
  alignas(8) unsigned char from[sizeof(K) < 8 ? 8 : sizeof(K)] = {};
  alignas(8) unsigned char to[sizeof(from)] = {};
  bool first = true, batched = true;
  for (;;) {
    __u32 n = kBatch;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    const int r =
        bpf_map_lookup_batch(fd, first ? nullptr : from, to, keys.data(), values.data(), &n, &opts);
    if (r != 0 && errno != ENOENT) {
      batched = false;  // no batch here (or a bucket past 512): every key, one at a time
      break;
    }
    for (__u32 i = 0; i < n; ++i) got.emplace_back(keys[i], values[i]);
    if (r != 0) break;  // ENOENT: that was the last batch
    std::memcpy(from, to, sizeof(from));
    first = false;
  }
  if (batched) {
    for (const auto& [k, v] : got) fn(k, v);
    return;
  }
  K key{}, next{};
  V value{};
  K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) fn(next, value);
    key = next;
    prev = &key;
  }
}

// for_each_entry's (key, value) pairs in one vector, for code that sorts or joins them.
template <typename K, typename V>
std::vector<std::pair<K, V>> map_entries(int fd) {
  std::vector<std::pair<K, V>> out;
  for_each_entry<K, V>(fd, [&](const K& k, const V& v) { out.emplace_back(k, v); });
  return out;
}

// The keys of a hash map, per-CPU or not.
template <typename K>
std::vector<K> map_keys(int fd) {
  std::vector<K> out;
  K key{}, next{};
  K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    out.push_back(next);
    key = next;
    prev = &key;
  }
  return out;
}

// The same over a per-CPU hash map: `fn(key, values)` with one value per possible CPU.
template <typename K, typename V, typename Fn>
void for_each_per_cpu_entry(int fd, Fn&& fn) {
  K key{}, next{};
  K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    auto values = read_per_cpu<V>(fd, &next);
    if (!values.empty()) fn(next, values);
    key = next;
    prev = &key;
  }
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_PERCPU_HPP
