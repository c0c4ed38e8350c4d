// SPDX-License-Identifier: Apache-2.0
#include "unwind/session_unwinder.hpp"

#include "symbols/process_watch.hpp"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "loupe/sdk/thread_name.hpp"
#include "session/health_report.hpp"
#include "unwind/process_tables.hpp"

namespace loupe {
namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// How often a process a runtime was not ready for is asked again: a JVM makes its
// CodeCache in its first tens of milliseconds.
constexpr std::uint64_t kLaterEveryNs = 100'000'000ull;

}  // namespace

SessionUnwinder::SessionUnwinder(ProcessTables& tables, ProcessWatch& watch,
                                 std::vector<std::unique_ptr<Runtime>> runtimes, std::uint32_t rows)
    : tables_(tables), watch_(watch), rows_(rows), runtimes_(std::move(runtimes)) {}

Result<const std::vector<loupe_map_ref>*> SessionUnwinder::maps() {
  if (refs_.empty() && create_error_.empty()) {
    if (Status st = create(); !st) {
      create_error_ = st.error();
      fds_.clear();
      spdlog::warn(
          "the session's unwinder: {}: each plugin keeps its own unwinder maps, "
          "with native frames only",
          create_error_);
    }
  }
  if (!create_error_.empty()) return make_error(create_error_);
  return &refs_;
}

SessionUnwinder::~SessionUnwinder() {
  stop_ = true;
  if (wake_.get() >= 0) {
    const std::uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof(one)) < 0) spdlog::debug("unwinder: wake: {}", errno);
  }
  if (reader_.joinable()) reader_.join();
  if (ring_) ring_buffer__free(ring_);
}

void SessionUnwinder::read_loop() {
  // The ring's own epoll and the stop eventfd in one set: the thread sleeps until a walk
  // tells a sighting or the session ends (a timed wait for the end was 10 wake-ups a
  // second of an idle agent).
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  bool ok = ep.get() >= 0;
  for (int fd : {ring_buffer__epoll_fd(ring_), wake_.get()}) {
    ev.data.fd = fd;
    ok = ok && fd >= 0 && ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
  }
  if (!ok) spdlog::warn("the unwinder's reader: epoll: {}; reading every 100 ms", errno);
  const int wait_fd = ok ? ep.get() : ring_buffer__epoll_fd(ring_);
  while (!stop_) {
    if (::epoll_wait(wait_fd, &ev, 1, ok ? -1 : 100) <= 0) continue;
    if (stop_) break;
    std::lock_guard lock(ring_mu_);
    ring_buffer__consume(ring_);
  }
}

Status SessionUnwinder::make_map(const RuntimeMapSpec& spec, const char* kernel_name) {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = spec.flags);
  const int fd = bpf_map_create(spec.type, kernel_name, spec.key_size, spec.value_size,
                                spec.max_entries, &opts);
  if (fd < 0)
    return make_error("creating the unwinder's map " + spec.name + ": " + std::strerror(errno));
  fds_.emplace_back(fd);
  names_.push_back(spec.name);
  by_name_[spec.name] = fd;
  return {};
}

Status SessionUnwinder::create() {
  const std::uint32_t rows = rows_;
  // The names the walk's header declares (unwind.bpf.h), and the kernel's for each (15
  // bytes at most, "ls_" so that a loaded object tells they are the session's).
  struct Shared {
    RuntimeMapSpec spec;
    const char* kernel_name;
  };
  const Shared shared[] = {
      {{"loupe_unwind_rows", BPF_MAP_TYPE_ARRAY, 4, sizeof(loupe_unwind_row), rows, 0},
       "ls_unwind_rows"},
      {{"loupe_unwind_procs", BPF_MAP_TYPE_HASH, 4, sizeof(loupe_unwind_proc), 1024,
        BPF_F_NO_PREALLOC},
       "ls_unwind_procs"},
      {{"loupe_unwind_files", BPF_MAP_TYPE_HASH, sizeof(loupe_unwind_file_key),
        sizeof(loupe_unwind_file), 4096, BPF_F_NO_PREALLOC},
       "ls_unwind_files"},
      {{"loupe_runtime_seen", BPF_MAP_TYPE_LRU_HASH, sizeof(loupe_runtime_seen_key), 1, 16384, 0},
       "ls_rt_seen"},
      {{"loupe_runtime_ring", BPF_MAP_TYPE_RINGBUF, 0, 0, 256 * 1024, 0}, "ls_rt_ring"},
  };
  for (const auto& m : shared)
    if (Status st = make_map(m.spec, m.kernel_name); !st) return st;
  for (const auto& rt : runtimes_) {
    for (const auto& spec : rt->maps()) {
      const std::string kernel_name =
          ("ls_" + spec.name.substr(spec.name.find('_') + 1)).substr(0, 15);
      if (Status st = make_map(spec, kernel_name.c_str()); !st) return st;
    }
  }
  ring_ = ring_buffer__new(by_name_.at("loupe_runtime_ring"), &SessionUnwinder::on_record, this,
                           nullptr);
  if (!ring_)
    return make_error("reading the unwinder's ring: " + std::string(std::strerror(errno)));
  wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  reader_ = std::thread([this] {
    sdk::name_this_thread("loupe-runtimes");
    read_loop();
  });
  if (Status st =
          tables_.attach(by_name_.at("loupe_unwind_rows"), by_name_.at("loupe_unwind_procs"));
      !st)
    return st;
  if (Status st = tables_.attach_files(by_name_.at("loupe_unwind_procs"),
                                       by_name_.at("loupe_unwind_files"));
      !st)
    return st;
  for (const auto& rt : runtimes_)
    if (Status st = rt->attach(by_name_); !st)
      spdlog::warn("{}: {}: its frames are not named", rt->name(), st.error());
  for (std::size_t i = 0; i < names_.size(); ++i)
    refs_.push_back({names_[i].c_str(), fds_[i].get(), 0});
  return {};
}

std::uint32_t SessionUnwinder::update(std::uint32_t pid, const std::vector<MapsEntry>& maps) {
  std::uint32_t bits = 0;
  bool later = false;
  for (const auto& rt : runtimes_) {
    switch (rt->update(pid, maps)) {
      case Runtime::Update::kYes: bits |= LOUPE_UNWIND_PROC_RUNTIME(rt->id()); break;
      case Runtime::Update::kLater: later = true; break;
      case Runtime::Update::kNo: break;
    }
  }
  std::lock_guard lock(later_mu_);
  if (later)
    later_.try_emplace(pid, now_ns());
  else
    later_.erase(pid);
  return bits;
}

void SessionUnwinder::forget(std::uint32_t pid) {
  for (const auto& rt : runtimes_) rt->forget(pid);
  std::lock_guard lock(later_mu_);
  later_.erase(pid);
}

void SessionUnwinder::poll(const std::function<void(std::uint32_t, std::uint32_t)>& rewrite) {
  if (ring_) {
    std::lock_guard lock(ring_mu_);
    ring_buffer__consume(ring_);
  }
  std::vector<std::uint32_t> due;
  {
    std::lock_guard lock(later_mu_);
    const std::uint64_t now = now_ns();
    for (auto& [pid, asked] : later_)
      if (now - asked >= kLaterEveryNs) {
        asked = now;
        due.push_back(pid);
      }
  }
  // A process a runtime was not ready for, asked again with its maps as they are now.
  for (std::uint32_t pid : due) {
    int err = 0;
    const auto read = watch_.maps(pid, ProcessWatch::kNow, &err);
    if (!read) {
      forget(pid);
      continue;
    }
    const std::uint32_t bits = update(pid, read->maps);
    if (bits) rewrite(pid, bits);
  }
}

int SessionUnwinder::on_record(void* self, void* data, std::size_t size) {
  auto* u = static_cast<SessionUnwinder*>(self);
  if (size < sizeof(loupe_runtime_seen_key)) return 0;
  const auto* key = static_cast<const loupe_runtime_seen_key*>(data);
  for (const auto& rt : u->runtimes_)
    if (rt->id() == key->runtime) {
      rt->seen(*key);
      return 0;
    }
  ++u->unknown_runtime_;
  return 0;
}

std::uint32_t SessionUnwinder::name(std::uint32_t pid, std::uint64_t frame,
                                    Symbolizer::RuntimeName* out, std::uint32_t max) {
  // The ring first: a sighting told just now is read before its frame is named.
  if (ring_) {
    std::lock_guard lock(ring_mu_);
    ring_buffer__consume(ring_);
  }
  const std::uint32_t id = LOUPE_RUNTIME_ID(frame);
  for (const auto& rt : runtimes_) {
    if (rt->id() != id) continue;
    if (const std::uint32_t n = rt->name(pid, frame, out, max); n > 0 || max == 0) return n;
    // Not read while its process lived: one frame of the runtime's kind, said as such.
    out[0] = Symbolizer::RuntimeName{};
    out[0].kind = rt->frame_kind();
    out[0].resolution = LOUPE_UNRESOLVED_PROCESS_GONE;
    return 1;
  }
  return 0;
}

void SessionUnwinder::tick(const std::vector<pid_t>& processes) {
  for (const auto& rt : runtimes_) rt->tick(processes);
}

void SessionUnwinder::before_final_report(const std::vector<pid_t>& processes) {
  for (const auto& rt : runtimes_) rt->before_final_report(processes);
}

void SessionUnwinder::report_health(HealthReport& health) const {
  for (const auto& rt : runtimes_) rt->report_health(health);
}

}  // namespace loupe
