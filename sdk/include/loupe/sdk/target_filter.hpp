// SPDX-License-Identifier: Apache-2.0
//
// The user-space twin of bpf/include/loupe/filter.bpf.h: the pid/tid/comm/cgroup config
// keys every profiler offers, declared once with one wording, read and checked once, and
// written into the loupe_filter_* rodata knobs of a skeleton.
//
//   constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kTargetFilterKeys);
//   ...
//   skel_.reset(x_bpf__open());
//   sdk::TargetFilter f = sdk::apply_target_filter(args.config, args.session, skel_.get());
//
// Given the skeleton (not only its rodata), the filter also follows the session's process
// tree: the object's loupe_tree map reuses the core's (bpf_map__reuse_fd) and the tgid
// test becomes membership, so the target's children and their descendants pass. Given
// only the rodata, the filter is "this process only" (what plugins built before the tree
// got), and uprobe_pid() says -1 only when the filter has no pid.
//
// A plugin that offers only some filters appends only those keys (sdk::kPidKey, ...): keys
// absent from the schema read as "off".
#ifndef LOUPE_SDK_TARGET_FILTER_HPP
#define LOUPE_SDK_TARGET_FILTER_HPP

#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "loupe/abi/config.h"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/ring.hpp"

namespace loupe::sdk {

// ---- the keys --------------------------------------------------------------------------

inline constexpr loupe_config_key kPidKey = {
    "pid", LOUPE_CFG_INT, 0, "0", "only this process (0 = the session's target or all)",
    0,     INT32_MAX};
inline constexpr loupe_config_key kTidKey = {
    "tid", LOUPE_CFG_INT, 0, "0", "only this thread (0 = all)", 0, INT32_MAX};
inline constexpr loupe_config_key kCommKey = {"comm", LOUPE_CFG_STRING, 0, "\"\"",
                                              "only tasks with this command name (<= 15 chars)"};
inline constexpr loupe_config_key kCgroupKey = {
    "cgroup", LOUPE_CFG_STRING, 0, "\"\"",
    "only this cgroup v2: a path relative to the cgroup2 mount (system.slice), an absolute "
    "path inside it, or a numeric id"};

// Every filter filter.bpf.h applies, in schema order.
inline constexpr std::array<loupe_config_key, 4> kTargetFilterKeys = {kPidKey, kTidKey, kCommKey,
                                                                      kCgroupKey};

namespace detail {
template <typename T>
struct KeyCount;
template <std::size_t N>
struct KeyCount<loupe_config_key[N]> : std::integral_constant<std::size_t, N> {};
template <std::size_t N>
struct KeyCount<std::array<loupe_config_key, N>> : std::integral_constant<std::size_t, N> {};
template <>
struct KeyCount<loupe_config_key> : std::integral_constant<std::size_t, 1> {};

template <typename Out>
constexpr void append_keys(Out& out, std::size_t& i, const loupe_config_key& k) {
  out[i++] = k;
}
template <typename Out, typename Seq>
constexpr void append_keys(Out& out, std::size_t& i, const Seq& keys) {
  for (const auto& k : keys) out[i++] = k;
}
}  // namespace detail

// A plugin's own keys followed by shared ones (arrays or single keys), as one static
// schema for LOUPE_PROFILER:
//   constexpr auto kKeys = concat_keys(kOwn, kTargetFilterKeys);
//   constexpr auto kKeys = concat_keys(kOwn, kPidKey);
template <typename... Parts>
constexpr auto concat_keys(const Parts&... parts) {
  std::array<loupe_config_key, (detail::KeyCount<Parts>::value + ...)> out{};
  std::size_t i = 0;
  (detail::append_keys(out, i, parts), ...);
  return out;
}

// ---- cgroup v2 ---------------------------------------------------------------------------

// Mount points of every cgroup2 file system in a /proc/PID/mountinfo text, in file order.
// Fields: id parent major:minor root mount-point options [optional...] - fstype source ...
inline std::vector<std::string> cgroup2_mounts(const std::string& mountinfo) {
  std::vector<std::string> out;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, devno, root, mount, word;
    if (!(f >> id >> parent >> devno >> root >> mount)) continue;
    while (f >> word && word != "-") {
    }
    std::string fstype;
    if (word == "-" && f >> fstype && fstype == "cgroup2") {
      // Octal escapes (\040 for a space) as the kernel writes them.
      std::string path;
      for (std::size_t i = 0; i < mount.size(); ++i) {
        if (mount[i] == '\\' && i + 3 < mount.size() &&
            std::isdigit(static_cast<unsigned char>(mount[i + 1]))) {
          path += static_cast<char>(std::stoi(mount.substr(i + 1, 3), nullptr, 8));
          i += 3;
        } else {
          path += mount[i];
        }
      }
      out.push_back(path);
    }
  }
  return out;
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A cgroup v2 named by `text` -> its id (the kernfs inode number, what
// bpf_get_current_cgroup_id() returns):
//   "1234"                      a numeric id, taken as is;
//   "/sys/fs/cgroup/unified/x"  an absolute path inside any cgroup2 mount;
//   "system.slice", "/a/b"      a path relative to the (first) cgroup2 mount, as
//                               /proc/PID/cgroup shows it ("0::/a/b").
// `mountinfo` is the text of /proc/self/mountinfo (a parameter so tests can give another).
// Throws Error(NOT_FOUND) when no cgroup2 is mounted or the path is not a directory there.
inline std::uint64_t resolve_cgroup_id(const std::string& text, const std::string& mountinfo) {
  if (!text.empty() &&
      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
    return std::stoull(text);
  auto mounts = cgroup2_mounts(mountinfo);
  if (mounts.empty())
    throw Error(LOUPE_ERR_NOT_FOUND, "cgroup '" + text +
                                         "': no cgroup v2 file system is mounted (none in "
                                         "/proc/self/mountinfo)");
  std::string path;
  for (const auto& m : mounts) {
    std::string prefix = m == "/" ? m : m + "/";
    if (text == m || text.rfind(prefix, 0) == 0) {
      path = text;
      break;
    }
  }
  if (path.empty()) {
    std::string rel = text;
    while (!rel.empty() && rel.front() == '/') rel.erase(rel.begin());
    path = mounts.front() + (mounts.front() == "/" ? "" : "/") + rel;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(LOUPE_ERR_NOT_FOUND,
                "cgroup '" + text + "': " + path + " is not a cgroup v2 directory");
  return st.st_ino;
}

inline std::uint64_t resolve_cgroup_id(const std::string& text) {
  return resolve_cgroup_id(text, read_text_file("/proc/self/mountinfo"));
}

// ---- reading and applying ------------------------------------------------------------

struct TargetFilter {
  std::uint32_t pid = 0;  // tgid; 0 = every process
  std::uint32_t tid = 0;
  std::string comm;  // "" = any
  std::uint64_t cgroup_id = 0;
  std::string cgroup;  // as configured
  // The core's process-tree map when the session follows the target's descendants and
  // `pid` is the session's target; -1 = "this process only". Host-owned (never closed here).
  int tree_fd = -1;

  // Whether the filter passes the target's descendants too.
  bool follows_tree() const { return tree_fd >= 0 && pid != 0; }
  // The pid to attach uprobes to: -1 (every process mapping the file, the BPF filter
  // keeps the tree) when following the tree or unfiltered, else the one process. A
  // per-process uprobe never fires in that process's children.
  int uprobe_pid() const { return follows_tree() || pid == 0 ? -1 : static_cast<int>(pid); }
};

// What following the tree costs others when a plugin's uprobes on `file` go system-wide:
// one line for the plugin to log at info level (empty when the filter does not follow the
// tree). Not a warning: it is the documented price of every `-- CMD` run, nothing the
// user got wrong, and a warning on every run taught users to skip warnings.
inline std::string tree_uprobe_note(const TargetFilter& f, const std::string& plugin,
                                    const std::string& file) {
  if (!f.follows_tree()) return {};
  return plugin + ": following pid " + std::to_string(f.pid) +
         " and its children: the uprobes on " + file +
         " trap in every process that maps it (filtered in BPF, a trap per call for them too); "
         "--no-follow keeps them on pid " +
         std::to_string(f.pid) + " alone";
}

// The session's process-tree map, or -1 when the session follows none (or the host is
// older than the field).
inline int session_tree_fd(const loupe_session_info* session) {
  if (!session || !LOUPE_ABI_HAS_FIELD(session, loupe_session_info, tree_map_fd) ||
      !(session->flags & LOUPE_SESSION_TREE))
    return -1;
  return session->tree_map_fd;
}

// The longest comm the kernel keeps (TASK_COMM_LEN 16 with its NUL).
inline constexpr std::size_t kMaxCommLen = 15;

// Reads the filter keys the schema declares (absent ones are off), takes the session's
// target pid when `pid` is 0 (refusing a pid that names another process), checks the comm
// length and resolves the cgroup. Call it in setup(), before opening the BPF object.
inline TargetFilter read_target_filter(const Config& cfg, const loupe_session_info* session) {
  TargetFilter f;
  std::int64_t pid = cfg.get_int("pid", 0);
  std::int64_t session_pid = session_target_pid(pid, session);
  f.pid = static_cast<std::uint32_t>(pid ? pid : session_pid);
  if (session_pid && f.pid == session_pid) f.tree_fd = session_tree_fd(session);
  f.tid = static_cast<std::uint32_t>(cfg.get_int("tid", 0));
  f.comm = cfg.get_string("comm", "");
  if (f.comm.size() > kMaxCommLen)
    throw Error(LOUPE_ERR_INVALID_ARG, "comm = \"" + f.comm +
                                           "\" is longer than 15 characters (the kernel "
                                           "truncates comm to 15)");
  f.cgroup = cfg.get_string("cgroup", "");
  if (!f.cgroup.empty()) f.cgroup_id = resolve_cgroup_id(f.cgroup);
  return f;
}

namespace detail {
template <typename T, typename = void>
struct IsSkeleton : std::false_type {};
template <typename T>
struct IsSkeleton<T, std::void_t<decltype(std::declval<T&>().maps.loupe_tree)>> : std::true_type {};
}  // namespace detail

// Writes `f` into the loupe_filter_* knobs of a skeleton's rodata (between open and load).
// Rodata alone cannot reach the tree map: the filter stays "this process only".
template <typename Rodata>
auto write_target_filter(const TargetFilter& f, Rodata* ro)
    -> decltype(ro->loupe_filter_tgid, void()) {
  static_assert(sizeof(ro->loupe_filter_comm) == kMaxCommLen + 1);
  ro->loupe_filter_tgid = f.pid;
  ro->loupe_filter_tid = f.tid;
  ro->loupe_filter_cgroup = f.cgroup_id;
  char* comm = const_cast<char*>(ro->loupe_filter_comm);
  std::memset(comm, 0, sizeof(ro->loupe_filter_comm));
  std::memcpy(comm, f.comm.data(), f.comm.size());
  ro->loupe_filter_comm_on = !f.comm.empty();
  // Plugins run in loupe's process: without a target, its own threads (ring readers, the
  // symbolizer, the session loop) would be profiled beside the machine's.
  ro->loupe_filter_not_tgid = f.pid == 0 ? static_cast<std::uint32_t>(::getpid()) : 0;
}

// Writes `f` into a skeleton (between open and load): the rodata knobs, and when the
// session follows the target's tree, the object's loupe_tree map reuses the core's map
// and loupe_filter_tree is set. Throws Error(KERNEL) when libbpf refuses the reuse.
template <typename Skeleton>
auto write_target_filter(const TargetFilter& f, Skeleton* skel)
    -> decltype(skel->rodata->loupe_filter_tree, skel->maps.loupe_tree, void()) {
  write_target_filter(f, skel->rodata);
  skel->rodata->loupe_filter_tree = false;
  if (!f.follows_tree()) return;
  int err = bpf_map__reuse_fd(skel->maps.loupe_tree, f.tree_fd);
  if (err)
    throw Error(LOUPE_ERR_KERNEL, std::string("sharing the session's process-tree map: ") +
                                      std::strerror(err < 0 ? -err : err));
  skel->rodata->loupe_filter_tree = true;
}

// Both in one call, for a plugin that opens its BPF object before it needs the filter.
// `target` is the skeleton (follows the tree) or its rodata (this process only).
template <typename Target>
TargetFilter apply_target_filter(const Config& cfg, const loupe_session_info* session,
                                 Target* target) {
  TargetFilter f = read_target_filter(cfg, session);
  if constexpr (!detail::IsSkeleton<Target>::value) f.tree_fd = -1;  // rodata: no tree
  write_target_filter(f, target);
  return f;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_TARGET_FILTER_HPP
