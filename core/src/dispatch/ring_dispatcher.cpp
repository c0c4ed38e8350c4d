// SPDX-License-Identifier: Apache-2.0
#include "dispatch/ring_dispatcher.hpp"
#include "loupe/sdk/thread_name.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loupe {
namespace {

// Returned by the sample callback to end a ring's batch: libbpf has already advanced the
// consumer position past this record, so nothing is read twice.
constexpr int kBatchFull = -ENOSPC;
constexpr std::uint64_t kDelaySample = 16;  // power of two

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
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

// Counters with one writer thread: a plain load + store, no locked instruction.
void bump(std::atomic<std::uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void store_max(std::atomic<std::uint64_t>& slot, std::uint64_t v) {
  std::uint64_t prev = slot.load(std::memory_order_relaxed);
  while (v > prev && !slot.compare_exchange_weak(prev, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

struct RingDispatcher::Ring {
  RingDispatcher* owner;
  std::uint32_t index;
  std::string plugin;
  std::string name;
  loupe_ring_spec spec;
  ring_buffer* rb = nullptr;   // one per ring, so batches are bounded per ring
  std::size_t batch = 0;       // records taken this round (reader thread)
  std::uint64_t round_ns = 0;  // when this round started: the read time of its records
  // Written by the reader (or the replay feeder) only...
  alignas(64) std::atomic<std::uint64_t> received{0}, malformed{0}, dropped{0}, coalesced{0},
      count_only{0};
  // ...and by the worker only: separate cache lines, so the two threads never share one.
  alignas(64) std::atomic<std::uint64_t> decode_errors{0}, decoded{0}, abandoned{0},
      max_delay_ns{0}, delay_sum_ns{0}, delay_samples{0};
  std::uint64_t delay_samples_seen = 0;
  std::atomic<bool> count_only_active{false};
  std::atomic<std::uint32_t> divisor{1};
  // Feedback state (reader thread).
  std::uint64_t fb_offered = 0, fb_lost = 0;
  int fb_clean = 0;
  std::mutex coalesce_mu;
  std::map<std::uint64_t, std::uint64_t> coalesced_by_key;
  std::uint64_t coalesced_keys_seen = 0;

  std::uint64_t lost_kernel() const { return read_percpu_sum(spec.lost_map_fd); }
};

RingDispatcher::RingDispatcher() : RingDispatcher(Options{}) {}
RingDispatcher::RingDispatcher(Options opts) {
  configure(opts);
}

RingDispatcher::~RingDispatcher() {
  stop(std::chrono::steady_clock::now());
  for (auto& r : rings_)
    if (r->rb) ring_buffer__free(r->rb);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void RingDispatcher::configure(const Options& opts) {
  opts_ = opts;
  if (opts_.batch_limit == 0) opts_.batch_limit = 1;
  if (opts_.max_divisor < 1) opts_.max_divisor = 1;
  queue_ = std::make_unique<ByteQueue>(opts_.queue_bytes, opts_.queue_capacity);
}

const char* RingDispatcher::check_header(const loupe_ring_spec& spec, const void* data,
                                         std::size_t len) {
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

Status RingDispatcher::add_ring(const std::string& plugin, const loupe_ring_spec& spec) {
  if (spec.size < offsetof(loupe_ring_spec, user) + sizeof(void*))
    return make_error("ring spec table truncated");
  if (started_)
    return make_error("rings must be registered during start(), before the session runs");
  if (spec.map_fd < 0 && !opts_.replay) return make_error("ring spec has no map_fd");
  if (!spec.decode) return make_error("ring spec has no decode callback");
  if (spec.min_len < sizeof(loupe_ring_header))
    return make_error("ring spec min_len is smaller than the record header");
  if (spec.max_len && spec.max_len < spec.min_len) return make_error("ring spec max_len < min_len");
  if (spec.policy > LOUPE_BP_COUNT_ONLY)
    return make_error(fmt::format("ring spec policy {} is unknown", spec.policy));
  if (spec.policy == LOUPE_BP_COALESCE && !spec.coalesce_key)
    return make_error("COALESCE policy needs a coalesce_key callback");
  auto ring = std::make_unique<Ring>();
  ring->owner = this;
  ring->plugin = plugin;
  ring->name = spec.name ? spec.name : "ring";
  ring->spec = spec;
  ring->spec.name = nullptr;  // borrowed; we keep our copy in `name`
  if (ring->spec.policy == LOUPE_BP_DEFAULT) {
    // Samples and pairs are statistics: counting what is dropped keeps them honest. A
    // must-keep ring with a key keeps its keys' counts rather than nothing.
    ring->spec.policy = spec.category == LOUPE_RING_MUST_KEEP && spec.coalesce_key
                            ? LOUPE_BP_COALESCE
                            : LOUPE_BP_DROP_NEWEST;
  }
  if (opts_.replay) {
    ring->spec.map_fd = ring->spec.lost_map_fd = ring->spec.divisor_map_fd = -1;
  } else {
    ring->rb = ring_buffer__new(spec.map_fd, &RingDispatcher::on_sample, ring.get(), nullptr);
    if (!ring->rb)
      return make_error(
          fmt::format("cannot attach to ring '{}': {}", ring->name, std::strerror(errno)));
    if (epoll_fd_ < 0) epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = ring.get();
    if (epoll_fd_ < 0 ||
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ring_buffer__epoll_fd(ring->rb), &ev) != 0) {
      std::string err = std::strerror(errno);
      ring_buffer__free(ring->rb);
      return make_error(fmt::format("cannot watch ring '{}': {}", ring->name, err));
    }
  }
  std::lock_guard lock(mu_);
  ring->index = static_cast<std::uint32_t>(rings_.size());
  rings_.push_back(std::move(ring));
  return {};
}

void RingDispatcher::emit_event(const Ring& ring, const char* what, std::uint32_t old_div,
                                std::uint32_t new_div, double ratio) {
  spdlog::info("ring {}/{}: {} (divisor {} -> {}, loss {:.2f}%)", ring.plugin, ring.name, what,
               old_div, new_div, ratio * 100);
  if (on_event_) on_event_(DispatchEvent{ring.plugin, ring.name, what, old_div, new_div, ratio});
}

void RingDispatcher::apply_policy(Ring& ring, const void* data, std::uint32_t len) {
  switch (ring.spec.policy) {
    case LOUPE_BP_COALESCE: {
      std::uint64_t key = ring.spec.coalesce_key(ring.spec.user, data, len);
      std::lock_guard lock(ring.coalesce_mu);
      auto it = ring.coalesced_by_key.find(key);
      if (it == ring.coalesced_by_key.end()) {
        if (ring.coalesced_by_key.size() >= opts_.max_coalesce_keys) key = kCoalesceOverflowKey;
        it = ring.coalesced_by_key.emplace(key, 0).first;
      }
      it->second += 1;
      bump(ring.coalesced);
      return;
    }
    case LOUPE_BP_COUNT_ONLY:
      bump(ring.count_only);
      if (!ring.count_only_active.exchange(true))
        emit_event(ring, "count_only_entered", ring.divisor, ring.divisor, 0);
      return;
    default: bump(ring.dropped); return;
  }
}

void RingDispatcher::accept(Ring& ring, const void* data, std::uint32_t len,
                            std::uint64_t read_ns) {
  bump(ring.received);
  if (check_header(ring.spec, data, len) != nullptr) {
    bump(ring.malformed);
    return;
  }
  if (ring.count_only_active.load(std::memory_order_relaxed)) {
    // Degraded: stay so until the worker has caught up, so the ring does not flap.
    if (queue_->fill() > opts_.count_only_resume_fill) {
      bump(ring.count_only);
      return;
    }
    ring.count_only_active.store(false);
    emit_event(ring, "count_only_left", ring.divisor, ring.divisor, 0);
  }
  if (queue_->try_push(ring.index, data, len, read_ns)) return;
  apply_policy(ring, data, len);
}

int RingDispatcher::on_sample(void* ctx, void* data, std::size_t len) {
  auto* ring = static_cast<Ring*>(ctx);
  RingDispatcher* self = ring->owner;
  auto n = static_cast<std::uint32_t>(len);
  if (self->capture_) self->capture_->append(ring->index, data, n, ring->round_ns);
  self->accept(*ring, data, n, ring->round_ns);
  return ++ring->batch >= self->opts_.batch_limit ? kBatchFull : 0;
}

void RingDispatcher::inject(std::size_t index, const void* data, std::uint32_t len,
                            bool wait_for_room) {
  Ring* ring = nullptr;
  {
    std::lock_guard lock(mu_);
    if (index >= rings_.size()) return;
    ring = rings_[index].get();
  }
  std::uint64_t now = mono_ns();
  if (wait_for_room && started_ && check_header(ring->spec, data, len) == nullptr) {
    while (!queue_->try_push(ring->index, data, len, now)) {
      queue_->notify();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    bump(ring->received);
    queue_->notify();
    return;
  }
  accept(*ring, data, len, now);
  queue_->notify();
}

void RingDispatcher::process(const ByteQueue::Slot& slot, bool abandon) {
  Ring* ring = rings_[slot.ring].get();  // the set is fixed while the worker runs
  if (abandon) {
    bump(ring->abandoned);
    return;
  }
  int rc = ring->spec.decode(ring->spec.user, slot.data, slot.len);
  bump(rc == LOUPE_OK ? ring->decoded : ring->decode_errors);
  // The delay is sampled (1 record in kDelaySample): a clock read per record costs as much
  // as the rest of the hand-off. Records of one round share their read time anyway.
  if ((ring->delay_samples_seen++ & (kDelaySample - 1)) != 0) return;
  std::uint64_t delay = mono_ns() - slot.read_ns;
  ring->delay_sum_ns.store(ring->delay_sum_ns.load(std::memory_order_relaxed) + delay,
                           std::memory_order_relaxed);
  bump(ring->delay_samples);
  store_max(ring->max_delay_ns, delay);
}

bool RingDispatcher::drain_round() {
  bool more = false, read = false;
  const std::uint64_t now = mono_ns();  // one clock read per round, not per record
  for (auto& r : rings_) {              // the set is fixed once the reader runs
    r->batch = 0;
    r->round_ns = now;
    int n = ring_buffer__consume(r->rb);
    if (n == kBatchFull) more = true;
    if (n != 0) read = true;
  }
  // An empty round queues nothing: waking the worker for it was two futex calls per
  // timed drain of an idle agent.
  if (read) queue_->notify();
  return more;
}

void RingDispatcher::feedback_tick() {
  std::lock_guard lock(mu_);
  for (auto& rp : rings_) {
    Ring& r = *rp;
    std::uint64_t kernel = r.lost_kernel();
    std::uint64_t lost =
        kernel + r.dropped.load() + r.abandoned.load() + r.coalesced.load() + r.count_only.load();
    std::uint64_t offered = r.received.load() + kernel;
    std::uint64_t d_lost = lost - r.fb_lost, d_offered = offered - r.fb_offered;
    r.fb_lost = lost;
    r.fb_offered = offered;
    if (r.spec.divisor_map_fd < 0) continue;
    double ratio = d_offered ? static_cast<double>(d_lost) / static_cast<double>(d_offered) : 0.0;
    std::uint32_t div = r.divisor.load(), next = div;
    if (d_offered && ratio > opts_.raise_loss_ratio) {
      r.fb_clean = 0;
      next = div * 2 > opts_.max_divisor ? opts_.max_divisor : div * 2;
    } else if (d_lost == 0 && div > 1 && ++r.fb_clean >= opts_.lower_after_clean_periods) {
      r.fb_clean = 0;
      next = div / 2;
    } else if (d_lost) {
      r.fb_clean = 0;
    }
    if (next == div) continue;
    std::uint32_t key = 0;
    if (bpf_map_update_elem(r.spec.divisor_map_fd, &key, &next, BPF_ANY) != 0) {
      spdlog::warn("ring {}/{}: cannot set the sampling divisor: {}", r.plugin, r.name,
                   std::strerror(errno));
      continue;
    }
    r.divisor.store(next);
    emit_event(r, next > div ? "divisor_raised" : "divisor_lowered", div, next, ratio);
  }
}

void RingDispatcher::reader_loop() {
  const int timeout_ms = static_cast<int>(opts_.max_delivery_delay.count());
  epoll_event events[16];
  while (!stop_reader_.load(std::memory_order_acquire)) {
    bool more = drain_round();
    auto now = std::chrono::steady_clock::now();
    if (now >= next_feedback_) {
      feedback_tick();
      next_feedback_ = now + opts_.feedback_period;
    }
    if (more) continue;  // a ring had more than a batch: serve everyone again at once
    // Wakes on a forced wake-up, else after the delivery delay: producers below the
    // watermark submit without waking us.
    int n = epoll_wait(epoll_fd_, events, 16, timeout_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("ring reader: epoll_wait: {}", std::strerror(errno));
      std::this_thread::sleep_for(opts_.max_delivery_delay);
    }
  }
}

void RingDispatcher::worker_loop() {
  // The reader wakes a sleeping worker with each batch it queues (ByteQueue::notify, no
  // lost wake-up), and stop() wakes it too: the timeout is a safety net, not a poll (at
  // the delivery delay it was 50 wake-ups a second of an idle agent).
  const auto idle = std::chrono::milliseconds(500);
  for (;;) {
    ByteQueue::Slot slot;
    if (queue_->peek(&slot)) {
      process(slot, abandon_.load(std::memory_order_relaxed));
      queue_->release(slot);
      continue;
    }
    if (stop_worker_.load(std::memory_order_acquire)) return;
    queue_->wait(idle);
  }
}

void RingDispatcher::start() {
  if (started_) return;
  started_ = true;
  stop_reader_ = stop_worker_ = abandon_ = false;
  next_feedback_ = std::chrono::steady_clock::now() + opts_.feedback_period;
  if (!opts_.replay && !rings_.empty())
    reader_ = std::thread([this] {
      sdk::name_this_thread("loupe-rings");
      reader_loop();
    });
  worker_ = std::thread([this] {
    sdk::name_this_thread("loupe-records");
    worker_loop();
  });
}

void RingDispatcher::stop(std::chrono::steady_clock::time_point deadline) {
  if (!started_) return;
  stop_reader_.store(true, std::memory_order_release);
  if (reader_.joinable()) reader_.join();
  // What the kernel still holds, in bounded rounds, until the deadline.
  if (!opts_.replay && !rings_.empty())
    while (drain_round() && std::chrono::steady_clock::now() < deadline) {
    }
  // The worker can be slow without being stuck: a first stack's symbolization took seconds
  // in a loaded guest, and 25 outlier records behind it were abandoned at the deadline. So
  // the wait goes on while records leave the queue: each one gives the worker the drain's
  // length again, up to four times it in all, which bounds how long a stop can take.
  const auto now = std::chrono::steady_clock::now();
  const auto length = std::max(deadline - now, std::chrono::steady_clock::duration::zero());
  const auto hard = now + 4 * length;
  auto until = deadline;
  std::size_t left = queue_->size();
  while (left > 0 && std::chrono::steady_clock::now() < until) {
    queue_->notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::size_t n = queue_->size();
    if (n < left)
      until = std::max(until, std::min(hard, std::chrono::steady_clock::now() + length));
    left = n;
  }
  if (queue_->size() > 0) {
    spdlog::warn(
        "ring drain deadline passed with {} records queued; they are counted as dropped "
        "([session] drain_timeout raises it)",
        queue_->size());
    abandon_.store(true);
  }
  stop_worker_.store(true, std::memory_order_release);
  queue_->wake();
  if (worker_.joinable()) worker_.join();
  started_ = false;
}

std::vector<RingStats> RingDispatcher::stats() const {
  std::lock_guard lock(mu_);
  std::vector<RingStats> out;
  for (const auto& r : rings_) {
    RingStats s;
    s.plugin = r->plugin;
    s.ring = r->name;
    s.lost_kernel_known = r->spec.lost_map_fd >= 0;
    s.lost_kernel = r->lost_kernel();
    s.received = r->received.load();
    s.malformed = r->malformed.load();
    s.abandoned = r->abandoned.load();
    s.dropped_queue = r->dropped.load() + s.abandoned;
    s.coalesced = r->coalesced.load();
    s.count_only = r->count_only.load();
    s.decode_errors = r->decode_errors.load();
    s.decoded = r->decoded.load();
    std::uint64_t done =
        s.malformed + s.dropped_queue + s.coalesced + s.count_only + s.decode_errors + s.decoded;
    s.queued = s.received > done ? s.received - done : 0;
    s.queue_high_water = queue_->high_water();
    s.max_delay_ns = r->max_delay_ns.load();
    std::uint64_t n = r->delay_samples.load();
    s.mean_delay_ns = n ? r->delay_sum_ns.load() / n : 0;
    s.divisor = r->divisor.load();
    {
      std::lock_guard cl(r->coalesce_mu);
      s.coalesced_keys = r->coalesced_by_key.size();
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<CoalescedCount> RingDispatcher::take_coalesced() {
  std::lock_guard lock(mu_);
  std::vector<CoalescedCount> out;
  for (auto& r : rings_) {
    std::map<std::uint64_t, std::uint64_t> keys;
    {
      std::lock_guard cl(r->coalesce_mu);
      keys.swap(r->coalesced_by_key);
    }
    for (auto& [k, n] : keys) out.push_back({r->plugin, r->name, k, n});
  }
  return out;
}

std::vector<CaptureRing> RingDispatcher::ring_table() const {
  std::lock_guard lock(mu_);
  std::vector<CaptureRing> out;
  for (const auto& r : rings_)
    out.push_back({r->plugin, r->name, r->spec.record_type, r->spec.record_version, r->spec.min_len,
                   r->spec.max_len});
  return out;
}

std::size_t RingDispatcher::ring_count() const {
  std::lock_guard lock(mu_);
  return rings_.size();
}

}  // namespace loupe
