// SPDX-License-Identifier: Apache-2.0
#include "hotspot/jvm_attach.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "symbols/perf_map.hpp"
#include "util/errno_text.hpp"
#include "util/unique_fd.hpp"

namespace loupe {
namespace {

using Clock = std::chrono::steady_clock;

Error attach_error(JvmAttachError kind, std::string message) {
  return make_error(std::move(message), static_cast<int>(kind));
}

struct JvmStatus {
  std::uint32_t nspid = 0;
  uid_t euid = 0;
  gid_t egid = 0;
  bool catches_sigquit = false;
  std::int64_t started_ns = 0;  // wall clock; 0 trusts any socket found
};

// The second field of "Uid:"/"Gid:" (real, effective, saved, fs) is the effective id.
bool read_status(std::uint32_t pid, const std::string& proc_dir, JvmStatus* st) {
  std::ifstream in(proc_dir + "/status");
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line.substr(line.find(':') + 1));
    if (line.starts_with("Uid:")) {
      unsigned long real = 0, eff = 0;
      fields >> real >> eff;
      st->euid = static_cast<uid_t>(eff);
    } else if (line.starts_with("Gid:")) {
      unsigned long real = 0, eff = 0;
      fields >> real >> eff;
      st->egid = static_cast<gid_t>(eff);
    } else if (line.starts_with("SigCgt:")) {
      unsigned long long mask = 0;
      fields >> std::hex >> mask;
      st->catches_sigquit = mask & (1ull << (SIGQUIT - 1));
    }
  }
  st->nspid = namespace_pid(pid, proc_dir);
  return true;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether the JVM was started with -XX:+DisableAttachMechanism, from where HotSpot reads
// its options, in its order (the last setting wins): JAVA_TOOL_OPTIONS, the launcher's
// JDK_JAVA_OPTIONS, the command line, _JAVA_OPTIONS. An @argfile or a -XX:Flags= file is
// not read: such a JVM costs one bound's wait and prints one thread dump.
bool attach_disabled(const std::string& proc_dir) {
  std::vector<std::string> env_words[3];
  const char* const kVars[] = {"JAVA_TOOL_OPTIONS=", "JDK_JAVA_OPTIONS=", "_JAVA_OPTIONS="};
  const std::string environ = read_all(proc_dir + "/environ");
  for (std::size_t at = 0; at < environ.size();) {
    std::size_t end = environ.find('\0', at);
    if (end == std::string::npos) end = environ.size();
    std::string_view var(environ.data() + at, end - at);
    for (int i = 0; i < 3; ++i)
      if (var.starts_with(kVars[i])) {
        std::istringstream words{std::string(var.substr(std::strlen(kVars[i])))};
        for (std::string w; words >> w;) env_words[i].push_back(w);
      }
    at = end + 1;
  }
  std::vector<std::string> args;
  const std::string cmdline = read_all(proc_dir + "/cmdline");
  for (std::size_t at = 0; at < cmdline.size();) {
    std::size_t end = cmdline.find('\0', at);
    if (end == std::string::npos) end = cmdline.size();
    args.emplace_back(cmdline, at, end - at);
    at = end + 1;
  }
  bool disabled = false;
  for (const auto* words : {&env_words[0], &env_words[1], &args, &env_words[2]})
    for (const auto& w : *words) {
      if (w == "-XX:+DisableAttachMechanism") disabled = true;
      if (w == "-XX:-DisableAttachMechanism") disabled = false;
    }
  return disabled;
}

// When the process started, in wall-clock nanoseconds (0 if unreadable): its start in
// /proc/PID/stat counts clock ticks since boot.
std::int64_t start_wall_ns(const std::string& proc_dir) {
  const std::string stat = read_all(proc_dir + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return 0;
  timespec boot{}, wall{};
  ::clock_gettime(CLOCK_BOOTTIME, &boot);
  ::clock_gettime(CLOCK_REALTIME, &wall);
  const auto ns = [](const timespec& t) { return t.tv_sec * 1'000'000'000LL + t.tv_nsec; };
  const long hz = ::sysconf(_SC_CLK_TCK);
  return ns(wall) - ns(boot) + static_cast<std::int64_t>(ticks) * (1'000'000'000LL / hz);
}

// The JVM's listener socket, if it is this JVM's: a JVM killed without cleanup leaves its
// socket behind, and a later process given the same pid would be asked through it (and
// refuse: ECONNREFUSED). A socket older than the process is such a leftover.
bool is_socket(const std::string& path, std::int64_t not_before_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  const std::int64_t made = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
  return made >= not_before_ns;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(left.count(), 0));
}

void set_timeouts(int fd, Clock::time_point deadline) {
  const int ms = std::max(remaining_ms(deadline), 1);
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// Connects to the listener; -errno on failure. Only system calls: the helper runs it
// between fork and _exit.
int connect_socket(const sockaddr_un& addr, Clock::time_point deadline) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  set_timeouts(fd, deadline);  // SO_SNDTIMEO also bounds a connect to a full backlog
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return -err;
  }
  return fd;
}

// One byte carrying one file descriptor (SCM_RIGHTS), as sent and as received. Not
// movable: msg points into the object itself.
struct FdMessage {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

// The listener takes the peer's credentials at connect(): a child process that holds the
// JVM's euid/egid connects and hands the socket back over a socket pair. Switching this
// process's credentials instead would switch every thread's.
Result<UniqueFd> connect_as(const sockaddr_un& addr, uid_t uid, gid_t gid,
                            Clock::time_point deadline) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return attach_error(JvmAttachError::kRefused, "socketpair: " + errno_text(errno));
  UniqueFd ours(pair[0]), theirs(pair[1]);
  const pid_t child = ::fork();
  if (child < 0) return attach_error(JvmAttachError::kRefused, "fork: " + errno_text(errno));
  if (child == 0) {
    // Raw system calls: glibc's wrappers would try to reach threads the child lacks.
    int fd = -EPERM;
    if (::syscall(SYS_setgroups, 0, nullptr) == 0 && ::syscall(SYS_setresgid, gid, gid, gid) == 0 &&
        ::syscall(SYS_setresuid, uid, uid, uid) == 0)
      fd = connect_socket(addr, deadline);
    else
      fd = -errno;
    if (fd < 0) ::_exit(-fd & 0xff);
    FdMessage m;
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ::_exit(::sendmsg(theirs.get(), &m.msg, 0) == 1 ? 0 : (errno & 0xff));
  }
  theirs.reset();
  UniqueFd got;
  pollfd p{ours.get(), POLLIN, 0};
  if (::poll(&p, 1, remaining_ms(deadline)) == 1) {
    FdMessage m;
    if (::recvmsg(ours.get(), &m.msg, MSG_CMSG_CLOEXEC) == 1)
      for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
          got.reset(fd);
        }
  } else {
    ::kill(child, SIGKILL);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (got.valid()) return got;
  const int err = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  return attach_error(
      err == EAGAIN || err == 0 ? JvmAttachError::kTimeout : JvmAttachError::kRefused,
      fmt::format("connecting as uid {} gid {}: {}", uid, gid,
                  err ? errno_text(err) : "no answer within the bound"));
}

// Whether this process and `pid` are in one user namespace (a uid means the same user).
bool same_user_namespace(const std::string& proc_dir) {
  struct stat ours {
  }, theirs{};
  return ::stat("/proc/self/ns/user", &ours) == 0 &&
         ::stat((proc_dir + "/ns/user").c_str(), &theirs) == 0 && ours.st_ino == theirs.st_ino &&
         ours.st_dev == theirs.st_dev;
}

// Starts the attach listener: the attach file, then SIGQUIT, then the socket's appearance.
Status start_listener(std::uint32_t pid, const std::string& proc_dir, const JvmStatus& st,
                      const std::string& socket_path, Clock::time_point deadline) {
  const std::string file = ".attach_pid" + std::to_string(st.nspid);
  std::string trigger;
  int err = 0;
  for (const std::string& dir : {proc_dir + "/cwd/", proc_dir + "/root/tmp/"}) {
    int fd = ::open((dir + file).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // The JVM starts its listener only for a file of its own euid or of root; root of
    // another user namespace is neither there.
    if (::geteuid() == 0) (void)::fchown(fd, st.euid, st.egid);
    ::close(fd);
    trigger = dir + file;
    break;
  }
  if (trigger.empty())
    return attach_error(
        JvmAttachError::kRefused,
        fmt::format("cannot create {} in its cwd nor its /tmp: {}", file, errno_text(err)));
  Status result;
  if (::kill(static_cast<pid_t>(pid), SIGQUIT) != 0) {
    result = attach_error(errno == ESRCH ? JvmAttachError::kGone : JvmAttachError::kRefused,
                          "SIGQUIT: " + errno_text(errno));
  } else {
    // A JVM can miss the first signal while it starts (its signal thread handles it as a
    // thread-dump request): HotSpot's own client signals once more half-way through its
    // bound, and so does this (a JVM as nobody once never listened after one, 1 run in 3).
    const auto again = Clock::now() + (deadline - Clock::now()) / 2;
    bool resent = false;
    while (!is_socket(socket_path, st.started_ns) && Clock::now() < deadline) {
      if (!resent && Clock::now() >= again) {
        resent = true;
        (void)::kill(static_cast<pid_t>(pid), SIGQUIT);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!is_socket(socket_path, st.started_ns))
      result = attach_error(::kill(static_cast<pid_t>(pid), 0) != 0 ? JvmAttachError::kGone
                                                                    : JvmAttachError::kTimeout,
                            "no attach listener within the bound (attach disabled with "
                            "-XX:+DisableAttachMechanism, or the JVM is stalled)");
  }
  ::unlink(trigger.c_str());
  return result;
}

}  // namespace

Result<JvmAnswer> jvm_command(std::uint32_t pid, const std::string& command,
                              const JvmAttachOptions& opts) {
  const auto start = Clock::now();
  const auto deadline = start + opts.timeout;
  const std::string proc_dir = opts.proc_root + "/" + std::to_string(pid);
  JvmStatus st;
  if (!read_status(pid, proc_dir, &st))
    return attach_error(JvmAttachError::kGone, "the process is gone");
  JvmAnswer answer;
  const std::string socket_path = proc_dir + "/root/tmp/.java_pid" + std::to_string(st.nspid);
  // Disabled first: such a JVM never listens, so a socket at its path is a leftover.
  if (attach_disabled(proc_dir))
    return attach_error(JvmAttachError::kDisabled, "attach disabled (-XX:+DisableAttachMechanism)");
  st.started_ns = start_wall_ns(proc_dir);
  if (!is_socket(socket_path, st.started_ns)) {
    if (!st.catches_sigquit)
      return attach_error(JvmAttachError::kNotReady,
                          "it does not catch SIGQUIT (started with -Xrs, or not initialized)");
    if (Status started = start_listener(pid, proc_dir, st, socket_path, deadline); !started)
      return Error{started.error(), started.code()};
    answer.started_listener = true;
  }

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path))
    return attach_error(JvmAttachError::kRefused, "socket path too long: " + socket_path);
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  UniqueFd sock;
  answer.through_helper =
      opts.connect_as_owner ||
      (::geteuid() != st.euid && !(::geteuid() == 0 && same_user_namespace(proc_dir)));
  if (answer.through_helper) {
    auto fd = connect_as(addr, st.euid, st.egid, deadline);
    if (!fd) return Error{fd.error(), fd.code()};
    sock = std::move(fd).value();
  } else {
    int fd = connect_socket(addr, deadline);
    if (fd < 0)
      return attach_error(fd == -EAGAIN ? JvmAttachError::kTimeout : JvmAttachError::kRefused,
                          "connect: " + errno_text(-fd));
    sock.reset(fd);
  }

  // The jcmd line is the first of the three arguments; the JVM drops a request with more
  // or fewer strings than five.
  std::string request("1\0jcmd\0", 7);
  request += command;
  request.append("\0\0\0", 3);
  set_timeouts(sock.get(), deadline);
  if (::send(sock.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size()))
    return attach_error(JvmAttachError::kRefused, "sending the request: " + errno_text(errno));
  constexpr std::size_t kMaxAnswer = 1 << 20;
  std::string reply;
  char buf[4096];
  for (;;) {
    pollfd p{sock.get(), POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) != 1)
      return attach_error(JvmAttachError::kTimeout, "no answer within the bound");
    ssize_t n = ::read(sock.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (reply.size() < kMaxAnswer) reply.append(buf, static_cast<std::size_t>(n));
  }
  answer.took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  const auto nl = reply.find('\n');
  if (reply.empty())
    return attach_error(JvmAttachError::kRefused,
                        "the JVM closed the connection without an answer (credentials refused)");
  const std::string code = reply.substr(0, nl);
  answer.output = nl == std::string::npos ? "" : reply.substr(nl + 1);
  if (code != "0") {
    std::string why = answer.output.substr(0, answer.output.find('\n'));
    return attach_error(
        JvmAttachError::kFailed,
        fmt::format("{} failed (status {}): {}", command, code, why.empty() ? "no message" : why));
  }
  return answer;
}

}  // namespace loupe
