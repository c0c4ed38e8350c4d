// SPDX-License-Identifier: Apache-2.0
#include "kernel/privileges.hpp"

#include "kernel/capabilities.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

namespace loupe {
namespace {

// What every thread applies. Written before the first signal is sent, read-only after.
struct Plan {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::uint64_t keep = 0;  // capability bit mask
};
Plan g_plan;

constexpr int kMaxThreads = 4096;
std::atomic<int> g_acked{0};
std::atomic<pid_t> g_acked_tids[kMaxThreads];
std::atomic<int> g_failed_step{0};  // 0 = none; else the Step that failed first
std::atomic<int> g_failed_errno{0};
std::atomic<pid_t> g_failed_tid{0};

enum Step {
  kNone,
  kKeepCaps,
  kSetGroups,
  kSetGid,
  kSetUid,
  kCapGet,
  kCapSet,
  kAmbient,
  kNoNewPrivs
};

const char* step_name(int s) {
  switch (s) {
    case kKeepCaps: return "prctl(PR_SET_KEEPCAPS)";
    case kSetGroups: return "setgroups";
    case kSetGid: return "setresgid";
    case kSetUid: return "setresuid";
    case kCapGet: return "capget";
    case kCapSet: return "capset";
    case kAmbient: return "prctl(PR_CAP_AMBIENT_CLEAR_ALL)";
    case kNoNewPrivs: return "prctl(PR_SET_NO_NEW_PRIVS)";
    default: return "?";
  }
}

pid_t this_tid() {
  return static_cast<pid_t>(::syscall(SYS_gettid));
}

// Credentials are per thread in the kernel; glibc's setuid() broadcasts to every thread,
// capset() does not. Raw syscalls only: this also runs inside a signal handler.
int apply_to_this_thread() {
  const Plan& p = g_plan;
  if (p.switch_user) {
    if (::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return kKeepCaps;
    gid_t groups[1] = {p.gid};
    if (::syscall(SYS_setgroups, 1, groups) != 0) return kSetGroups;
    if (::syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) return kSetGid;
    if (::syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) return kSetUid;
    ::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  }
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) return kCapGet;
  std::uint64_t permitted =
      data[0].permitted | (static_cast<std::uint64_t>(data[1].permitted) << 32);
  std::uint64_t now = permitted & p.keep;
  for (int i = 0; i < 2; ++i) {
    data[i].permitted = static_cast<std::uint32_t>(now >> (32 * i));
    data[i].effective = data[i].permitted;
    data[i].inheritable = 0;
  }
  if (::syscall(SYS_capset, &hdr, data) != 0) return kCapSet;
  // EINVAL: a kernel without ambient capabilities (< 4.3) has none to clear.
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return kAmbient;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return kNoNewPrivs;
  return kNone;
}

void on_drop_signal(int) {
  int saved = errno;
  int step = apply_to_this_thread();
  pid_t tid = this_tid();
  if (step != kNone) {
    int expected = 0;
    if (g_failed_step.compare_exchange_strong(expected, step)) {
      g_failed_errno.store(errno);
      g_failed_tid.store(tid);
    }
  }
  int slot = g_acked.fetch_add(1);
  if (slot < kMaxThreads) g_acked_tids[slot].store(tid);
  errno = saved;
}

Result<std::vector<pid_t>> list_threads() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return make_error(fmt::format("cannot list /proc/self/task: {}", std::strerror(errno)));
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  ::closedir(d);
  return out;
}

bool thread_exists(pid_t tid) {
  return ::access(fmt::format("/proc/self/task/{}", tid).c_str(), F_OK) == 0;
}

bool acked(pid_t tid) {
  int n = std::min(g_acked.load(), kMaxThreads);
  for (int i = 0; i < n; ++i)
    if (g_acked_tids[i].load() == tid) return true;
  return false;
}

// Reads "Key:\tvalue" from a thread's status file.
std::string status_field(pid_t tid, const std::string& key) {
  std::ifstream in(fmt::format("/proc/self/task/{}/status", tid));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

// The kernel's view, not ours: every thread must show the new uid and no capability
// outside `keep`.
Status verify(const std::vector<pid_t>& tids) {
  for (pid_t tid : tids) {
    if (!thread_exists(tid)) continue;
    std::string eff = status_field(tid, "CapEff"), prm = status_field(tid, "CapPrm");
    if (eff.empty()) continue;  // exited meanwhile
    std::uint64_t e = std::stoull(eff, nullptr, 16), p = std::stoull(prm, nullptr, 16);
    if ((e | p) & ~g_plan.keep)
      return make_error(fmt::format("thread {} still holds capabilities {:#x} after the drop", tid,
                                    (e | p) & ~g_plan.keep));
    if (g_plan.switch_user) {
      unsigned r = 0, ef = 0, s = 0, fs = 0;
      std::sscanf(status_field(tid, "Uid").c_str(), "%u %u %u %u", &r, &ef, &s, &fs);
      if (r != g_plan.uid || ef != g_plan.uid || s != g_plan.uid || fs != g_plan.uid)
        return make_error(fmt::format("thread {} still runs as uid {} after switching to {}", tid,
                                      ef, g_plan.uid));
    }
  }
  return {};
}

}  // namespace

Result<UserIdentity> lookup_user(const std::string& name_or_uid) {
  std::vector<char> buf(16384);
  passwd pw{}, *res = nullptr;
  int rc = ::getpwnam_r(name_or_uid.c_str(), &pw, buf.data(), buf.size(), &res);
  if (!res && !name_or_uid.empty() &&
      name_or_uid.find_first_not_of("0123456789") == std::string::npos)
    rc = ::getpwuid_r(static_cast<uid_t>(std::stoul(name_or_uid)), &pw, buf.data(), buf.size(),
                      &res);
  if (!res)
    return make_error(
        rc ? fmt::format("cannot look up user '{}': {}", name_or_uid, std::strerror(rc))
           : fmt::format("no such user '{}'", name_or_uid));
  return UserIdentity{pw.pw_name, pw.pw_uid, pw.pw_gid};
}

std::vector<int> post_attach_capabilities(const PostAttachNeeds& needs) {
  std::vector<int> keep = {kCapSysPtrace, kCapDacReadSearch, kCapCheckpointRestore, kCapSyslog};
  if (needs.signal_command) keep.push_back(kCapKill);
  return keep;
}

Status drop_privileges(const std::vector<int>& keep, const std::optional<UserIdentity>& user) {
  g_plan = Plan{};
  for (int c : keep) g_plan.keep |= 1ull << c;
  if (user) {
    g_plan.switch_user = true;
    g_plan.uid = user->uid;
    g_plan.gid = user->gid;
  }
  g_acked = 0;
  g_failed_step = 0;
  const pid_t self = this_tid();
  auto fail = [&](int step, int err, pid_t tid) {
    return make_error(fmt::format("dropping privileges{}: {} failed in thread {}: {}",
                                  user ? fmt::format(" (switching to user '{}')", user->name) : "",
                                  step_name(step), tid, std::strerror(err)));
  };
  if (int step = apply_to_this_thread(); step != kNone) return fail(step, errno, self);

  // One real-time signal per other thread, whose handler applies the same plan; threads
  // started meanwhile are caught by the next scan (they inherit whichever creds their
  // creator had at that moment).
  const int sig = SIGRTMIN + 7;
  struct sigaction sa {
  }, old{};
  sa.sa_handler = on_drop_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, &old);
  std::set<pid_t> done = {self};
  std::vector<pid_t> all;
  for (int round = 0;; ++round) {
    auto listed = list_threads();
    if (!listed) {
      ::sigaction(sig, &old, nullptr);
      return make_error(listed.error());
    }
    all = std::move(listed.value());
    std::vector<pid_t> todo;
    for (pid_t t : all)
      if (!done.count(t) && !acked(t)) todo.push_back(t);
    if (todo.empty()) break;
    if (round > 20) {
      ::sigaction(sig, &old, nullptr);
      return make_error(
          "dropping privileges: threads keep appearing faster than they can be changed");
    }
    for (pid_t t : todo)
      if (::syscall(SYS_tgkill, ::getpid(), t, sig) != 0) done.insert(t);  // ESRCH: it exited
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (pid_t t : todo) {
      while (!acked(t) && thread_exists(t)) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::sigaction(sig, &old, nullptr);
          return make_error(
              fmt::format("dropping privileges: thread {} did not apply the change within 5 s "
                          "(does it block signal {}?)",
                          t, sig));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      done.insert(t);
    }
    if (int step = g_failed_step.load(); step != kNone) {
      ::sigaction(sig, &old, nullptr);
      return fail(step, g_failed_errno.load(), g_failed_tid.load());
    }
  }
  ::sigaction(sig, &old, nullptr);
  return verify(all);
}

}  // namespace loupe
