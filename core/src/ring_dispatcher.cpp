// SPDX-License-Identifier: Apache-2.0
#include "ring_dispatcher.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <cstring>

namespace loupe {
namespace {

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t read_percpu_sum(int fd) {
  int ncpu = libbpf_num_possible_cpus();
  if (fd < 0 || ncpu <= 0) return 0;
  std::vector<std::uint64_t> vals(static_cast<std::size_t>(ncpu));
  std::uint32_t key = 0;
  if (bpf_map_lookup_elem(fd, &key, vals.data()) != 0) return 0;
  std::uint64_t sum = 0;
  for (auto v : vals) sum += v;
  return sum;
}

}  // namespace

struct RingDispatcher::Ring {
  RingDispatcher* owner;
  std::string plugin;
  std::string name;
  loupe_ring_spec spec;
  std::atomic<std::uint64_t> received{0}, malformed{0}, dropped{0}, coalesced{0}, decode_errors{0}, decoded{0},
      max_delay_ns{0};
  std::mutex coalesce_mu;
  std::map<std::uint64_t, std::uint64_t> coalesced_by_key;
};

RingDispatcher::RingDispatcher() : RingDispatcher(Options{}) {}
RingDispatcher::RingDispatcher(Options opts) : opts_(opts), queue_(opts.queue_capacity) {}

RingDispatcher::~RingDispatcher() {
  stop(std::chrono::steady_clock::now());
  if (rb_) ring_buffer__free(rb_);
}

const char* RingDispatcher::check_header(const loupe_ring_spec& spec, const void* data, std::size_t len) {
  if (len < sizeof(loupe_ring_header)) return "shorter than the record header";
  loupe_ring_header h;
  std::memcpy(&h, data, sizeof(h));
  if (h.type != spec.record_type) return "unexpected record type";
  if (h.version != spec.record_version) return "unexpected record version";
  if (h.len != len) return "header length disagrees with the ring's";
  if (len < spec.min_len) return "shorter than the declared minimum";
  if (spec.max_len && len > spec.max_len) return "longer than the declared maximum";
  return nullptr;
}

std::string RingDispatcher::add_ring(const std::string& plugin, const loupe_ring_spec& spec) {
  if (spec.size < offsetof(loupe_ring_spec, user) + sizeof(void*)) return "ring spec table truncated";
  if (started_) return "rings must be registered during start(), before the session runs";
  if (spec.map_fd < 0) return "ring spec has no map_fd";
  if (!spec.decode) return "ring spec has no decode callback";
  if (spec.min_len < sizeof(loupe_ring_header)) return "ring spec min_len is smaller than the record header";
  if (spec.max_len && spec.max_len < spec.min_len) return "ring spec max_len < min_len";
  if (spec.policy == LOUPE_BP_COALESCE && !spec.coalesce_key) return "COALESCE policy needs a coalesce_key callback";
  auto ring = std::make_unique<Ring>();
  ring->owner = this;
  ring->plugin = plugin;
  ring->name = spec.name ? spec.name : "ring";
  ring->spec = spec;
  ring->spec.name = nullptr;  // borrowed; we keep our copy in `name`
  if (ring->spec.policy == LOUPE_BP_DEFAULT)
    ring->spec.policy = spec.category == LOUPE_RING_DROPPABLE_SAMPLE ? LOUPE_BP_DROP_NEWEST : LOUPE_BP_DROP_NEWEST;
  std::lock_guard lock(mu_);
  int err = 0;
  if (!rb_) {
    rb_ = ring_buffer__new(spec.map_fd, &RingDispatcher::on_sample, ring.get(), nullptr);
    if (!rb_) err = -errno;
  } else {
    err = ring_buffer__add(rb_, spec.map_fd, &RingDispatcher::on_sample, ring.get());
  }
  if (err) return fmt::format("cannot attach to ring '{}': {}", ring->name, std::strerror(-err));
  rings_.push_back(std::move(ring));
  return {};
}

int RingDispatcher::on_sample(void* ctx, void* data, std::size_t len) {
  auto* ring = static_cast<Ring*>(ctx);
  ring->received.fetch_add(1, std::memory_order_relaxed);
  if (check_header(ring->spec, data, len) != nullptr) {
    ring->malformed.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  Item item{ring, std::vector<std::uint8_t>(static_cast<std::uint8_t*>(data), static_cast<std::uint8_t*>(data) + len),
            mono_ns()};
  if (ring->owner->queue_.try_push(std::move(item))) return 0;
  if (ring->spec.policy == LOUPE_BP_COALESCE) {
    std::uint64_t key = ring->spec.coalesce_key(ring->spec.user, data, static_cast<std::uint32_t>(len));
    std::lock_guard lock(ring->coalesce_mu);
    ring->coalesced_by_key[key] += 1;
    ring->coalesced.fetch_add(1, std::memory_order_relaxed);
  } else {
    ring->dropped.fetch_add(1, std::memory_order_relaxed);
  }
  return 0;
}

void RingDispatcher::process(Item& item) {
  Ring* ring = item.ring;
  int rc = ring->spec.decode(ring->spec.user, item.bytes.data(), static_cast<std::uint32_t>(item.bytes.size()));
  if (rc == LOUPE_OK)
    ring->decoded.fetch_add(1, std::memory_order_relaxed);
  else
    ring->decode_errors.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t delay = mono_ns() - item.read_ns;
  std::uint64_t prev = ring->max_delay_ns.load(std::memory_order_relaxed);
  while (delay > prev && !ring->max_delay_ns.compare_exchange_weak(prev, delay)) {
  }
}

void RingDispatcher::reader_loop() {
  const int timeout_ms = static_cast<int>(opts_.max_delivery_delay.count());
  while (!stop_reader_.load(std::memory_order_acquire)) {
    ring_buffer* rb = nullptr;
    {
      std::lock_guard lock(mu_);
      rb = rb_;
    }
    if (!rb) {
      std::this_thread::sleep_for(opts_.max_delivery_delay);
      continue;
    }
    int n = ring_buffer__poll(rb, timeout_ms);
    if (n == -EINTR) continue;
    // Producers submit with BPF_RB_NO_WAKEUP below the watermark: drain on our schedule.
    if (n == 0) ring_buffer__consume(rb);
  }
}

void RingDispatcher::worker_loop() {
  for (;;) {
    auto item = queue_.pop(std::chrono::milliseconds(100));
    if (!item) {
      if (queue_.closed() && queue_.size() == 0) return;
      continue;
    }
    process(*item);
  }
}

void RingDispatcher::start() {
  if (started_) return;
  started_ = true;
  reader_ = std::thread([this] { reader_loop(); });
  worker_ = std::thread([this] { worker_loop(); });
}

void RingDispatcher::stop(std::chrono::steady_clock::time_point deadline) {
  if (!started_) return;
  started_ = false;
  stop_reader_.store(true, std::memory_order_release);
  if (reader_.joinable()) reader_.join();
  {
    std::lock_guard lock(mu_);
    if (rb_) ring_buffer__consume(rb_);  // what the kernel still holds
  }
  // Let the worker drain until the deadline, then count the rest as dropped.
  while (queue_.size() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  queue_.close();
  if (queue_.size() > 0) {
    spdlog::warn("ring drain deadline passed with {} records queued; they are counted as dropped", queue_.size());
    while (auto item = queue_.pop(std::chrono::milliseconds(0))) item->ring->dropped.fetch_add(1);
  }
  if (worker_.joinable()) worker_.join();
}

std::vector<RingStats> RingDispatcher::stats() const {
  std::lock_guard lock(mu_);
  std::vector<RingStats> out;
  for (const auto& r : rings_) {
    RingStats s;
    s.plugin = r->plugin;
    s.ring = r->name;
    s.lost_kernel_known = r->spec.lost_map_fd >= 0;
    s.lost_kernel = read_percpu_sum(r->spec.lost_map_fd);
    s.received = r->received.load();
    s.malformed = r->malformed.load();
    s.dropped_queue = r->dropped.load();
    s.coalesced = r->coalesced.load();
    s.decode_errors = r->decode_errors.load();
    s.decoded = r->decoded.load();
    s.queue_high_water = queue_.high_water();
    s.max_delay_ns = r->max_delay_ns.load();
    out.push_back(std::move(s));
  }
  return out;
}

std::size_t RingDispatcher::ring_count() const {
  std::lock_guard lock(mu_);
  return rings_.size();
}

}  // namespace loupe
