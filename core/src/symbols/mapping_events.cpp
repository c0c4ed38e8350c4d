// SPDX-License-Identifier: Apache-2.0
#include "symbols/mapping_events.hpp"

#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "util/unique_fd.hpp"

namespace loupe {

namespace {

// A process start maps ~30 regions, code and data (~4 KiB of records), and a session drains
// every 20 ms, or later while it builds a new file's unwind table. 64 KiB per CPU lost
// ~4,200 records of a shell loop starting 300 `cat`s (~1 ms each); 512 KiB per CPU (perf
// record's default, and what perf_event_mlock_kb allows an unprivileged user per CPU) lost
// none. Halved down to 64 KiB when the kernel refuses the lock; what is still dropped is
// counted.
constexpr std::size_t kDataPages = 128;
constexpr std::size_t kFewestDataPages = 16;

long perf_event_open(perf_event_attr* attr, pid_t pid, int cpu) {
  return ::syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

perf_event_attr mapping_attr(bool inherit, bool data = true) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_DUMMY;
  // Every record ends with (pid, tid, time): records of one process spread over the CPUs
  // it ran on, and the time puts an exec before the mappings of the new image.
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  a.sample_id_all = 1;
  // Code and data mappings: stacks point into code, lock and variable names into data
  // (.data, .bss and the anonymous rest of .bss).
  a.mmap = 1;
  a.mmap_data = data ? 1 : 0;
  a.mmap2 = 1;
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.inherit = inherit ? 1 : 0;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  return a;
}

// The path as d_path wrote it: " (deleted)" marks an unlinked file (memfd, replaced
// library), "//anon" anonymous memory, as /proc/PID/maps does.
void set_path(MapsEntry& m, std::string_view name) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (name.ends_with(kDeleted)) {
    m.deleted = true;
    name.remove_suffix(kDeleted.size());
  }
  if (name == "//anon") name = {};
  m.path.assign(name);
}

template <typename T>
T field(const char* rec, std::size_t off) {
  T v;
  std::memcpy(&v, rec + off, sizeof(v));
  return v;
}

}  // namespace

struct MappingEvents::Buffer {
  int cpu = -1;
  UniqueFd leader;                // the event whose buffer the CPU's other events share
  std::vector<UniqueFd> members;  // SET_OUTPUT into leader's buffer
  void* base = nullptr;
  std::size_t map_bytes = 0;
  std::vector<char> scratch;  // a record that wraps round the end is copied here

  Buffer() = default;
  Buffer(Buffer&& o) noexcept
      : cpu(o.cpu),
        leader(std::move(o.leader)),
        members(std::move(o.members)),
        base(std::exchange(o.base, nullptr)),
        map_bytes(o.map_bytes),
        scratch(std::move(o.scratch)) {}
  ~Buffer() {
    if (base) ::munmap(base, map_bytes);
  }

  // Makes `fd` the leader, its ring mapped: the largest size the memlock limit allows,
  // halving down to kFewestDataPages. False (and `*last_errno`) when none could be.
  bool map(UniqueFd fd, long page, int* last_errno) {
    void* p = MAP_FAILED;
    std::size_t bytes = 0;
    for (std::size_t pages = kDataPages; p == MAP_FAILED && pages >= kFewestDataPages; pages /= 2) {
      bytes = static_cast<std::size_t>(page) * (1 + pages);
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
      if (p == MAP_FAILED) *last_errno = errno;
    }
    if (p == MAP_FAILED) return false;
    base = p;
    map_bytes = bytes;
    leader = std::move(fd);
    return true;
  }
};

Result<std::unique_ptr<MappingEvents>> MappingEvents::open(const std::vector<pid_t>& tasks,
                                                           bool inherit, std::size_t max_tasks) {
  std::unique_ptr<MappingEvents> ev(new MappingEvents());
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t followed = std::min(tasks.size(), max_tasks);
  ev->counters_.tasks_missed = tasks.size() - followed;
  std::vector<bool> task_ok(followed, false);
  int last_errno = 0;
  for (int cpu = 0; cpu < ::get_nprocs_conf(); ++cpu) {
    Buffer b;
    b.cpu = cpu;
    for (std::size_t t = 0; t < followed; ++t) {
      perf_event_attr attr = mapping_attr(inherit);
      UniqueFd fd(static_cast<int>(perf_event_open(&attr, tasks[t], cpu)));
      if (fd.get() < 0) {
        last_errno = errno;
        if (errno == ENODEV) break;  // an offline CPU: no task runs there
        continue;
      }
      if (b.leader.get() < 0) {
        if (!b.map(std::move(fd), page, &last_errno)) continue;
      } else if (::ioctl(fd.get(), PERF_EVENT_IOC_SET_OUTPUT, b.leader.get()) != 0) {
        last_errno = errno;
        continue;
      } else {
        b.members.push_back(std::move(fd));
      }
      task_ok[t] = true;
    }
    if (b.leader.get() >= 0) ev->buffers_.push_back(std::move(b));
  }
  for (bool ok : task_ok) (ok ? ev->counters_.tasks : ev->counters_.tasks_missed)++;
  if (ev->buffers_.empty()) {
    return make_error(std::string("perf_event_open(dummy, mmap records): ") +
                      std::strerror(last_errno) +
                      (last_errno == EACCES || last_errno == EPERM ? " (needs CAP_PERFMON)" : ""));
  }
  return ev;
}

Result<std::unique_ptr<MappingEvents>> MappingEvents::open_system_wide(bool code_only) {
  std::unique_ptr<MappingEvents> ev(new MappingEvents());
  const long page = ::sysconf(_SC_PAGESIZE);
  int last_errno = 0;
  for (int cpu = 0; cpu < ::get_nprocs_conf(); ++cpu) {
    perf_event_attr attr = mapping_attr(false, !code_only);
    UniqueFd fd(static_cast<int>(perf_event_open(&attr, -1, cpu)));
    if (fd.get() < 0) {
      last_errno = errno;
      continue;  // an offline CPU (ENODEV) runs nothing; a refusal is said below
    }
    Buffer b;
    b.cpu = cpu;
    if (b.map(std::move(fd), page, &last_errno)) ev->buffers_.push_back(std::move(b));
  }
  if (ev->buffers_.empty()) {
    return make_error(std::string("perf_event_open(dummy, mmap records, every CPU): ") +
                      std::strerror(last_errno) +
                      (last_errno == EACCES || last_errno == EPERM ? " (needs CAP_PERFMON)" : ""));
  }
  return ev;
}

MappingEvents::~MappingEvents() = default;

void MappingEvents::drain(const std::function<void(const MappingEvent&)>& fn) {
  batch_.clear();
  for (Buffer& b : buffers_) {
    auto* meta = static_cast<perf_event_mmap_page*>(b.base);
    const std::uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    std::uint64_t tail = meta->data_tail;
    if (tail == head) continue;
    const char* data = static_cast<const char*>(b.base) + meta->data_offset;
    const std::uint64_t size = meta->data_size;
    while (tail < head) {
      perf_event_header h;
      const std::uint64_t at = tail % size;
      // The header itself is 8 bytes and records are 8-aligned: it never wraps.
      std::memcpy(&h, data + at, sizeof(h));
      if (h.size < sizeof(h) || h.size > head - tail) break;  // torn: never expected
      const char* rec = data + at;
      if (at + h.size > size) {
        b.scratch.resize(h.size);
        std::size_t first = size - at;
        std::memcpy(b.scratch.data(), data + at, first);
        std::memcpy(b.scratch.data() + first, data, h.size - first);
        rec = b.scratch.data();
      }
      tail += h.size;
      ++counters_.records;
      // sample_id_all: (pid, tid, time) close every record but LOST's own fields.
      const std::uint64_t time = field<std::uint64_t>(rec, h.size - 8);
      const std::size_t body = sizeof(h);
      switch (h.type) {
        case PERF_RECORD_MMAP2: {
          // pid tid | addr len pgoff | maj min | ino ino_gen | prot flags | filename
          constexpr std::size_t kName = 8 + 24 + 8 + 16 + 8;
          if (h.size < body + kName + 16) break;
          MappingEvent e{MappingEvent::Kind::kMap, field<std::uint32_t>(rec, body), 0, time, {}};
          const std::uint64_t addr = field<std::uint64_t>(rec, body + 8);
          e.map.start = addr;
          e.map.end = addr + field<std::uint64_t>(rec, body + 16);
          e.map.offset = field<std::uint64_t>(rec, body + 24);
          e.map.dev_major = field<std::uint32_t>(rec, body + 32);
          e.map.dev_minor = field<std::uint32_t>(rec, body + 36);
          e.map.inode = field<std::uint64_t>(rec, body + 40);
          e.map.executable = (field<std::uint32_t>(rec, body + 56) & PROT_EXEC) != 0;
          const char* name = rec + body + kName;
          set_path(e.map, std::string_view(name, ::strnlen(name, h.size - body - kName - 16)));
          ++counters_.maps;
          batch_.push_back(std::move(e));
          break;
        }
        case PERF_RECORD_COMM:
          if (h.misc & PERF_RECORD_MISC_COMM_EXEC) {
            ++counters_.execs;
            batch_.push_back(
                {MappingEvent::Kind::kExec, field<std::uint32_t>(rec, body), 0, time, {}});
          }
          break;
        case PERF_RECORD_FORK: {
          // pid ppid tid ptid time: a new process when the child leads its own group.
          auto pid = field<std::uint32_t>(rec, body);
          auto ppid = field<std::uint32_t>(rec, body + 4);
          auto tid = field<std::uint32_t>(rec, body + 8);
          if (pid == tid && pid != ppid) {
            ++counters_.forks;
            batch_.push_back({MappingEvent::Kind::kFork, pid, ppid, time, {}});
          }
          break;
        }
        case PERF_RECORD_EXIT: {
          // pid ppid tid ptid time: a process is gone when its group leader is.
          auto pid = field<std::uint32_t>(rec, body);
          auto tid = field<std::uint32_t>(rec, body + 8);
          if (pid == tid) {
            ++counters_.exits;
            batch_.push_back({MappingEvent::Kind::kExit, pid, 0, time, {}});
          }
          break;
        }
        case PERF_RECORD_LOST: counters_.lost += field<std::uint64_t>(rec, body + 8); break;
        default: break;
      }
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
  if (batch_.empty()) return;
  std::stable_sort(batch_.begin(), batch_.end(), [](const MappingEvent& a, const MappingEvent& b) {
    return a.time_ns < b.time_ns;
  });
  for (const MappingEvent& e : batch_) fn(e);
}

std::vector<pid_t> threads_of(const std::vector<pid_t>& pids, const std::string& proc_root) {
  std::vector<pid_t> out;
  for (pid_t pid : pids) {
    std::string dir = proc_root + "/" + std::to_string(pid) + "/task";
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      out.push_back(static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10)));
    }
    ::closedir(d);
  }
  return out;
}

}  // namespace loupe
