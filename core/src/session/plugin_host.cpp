// SPDX-License-Identifier: Apache-2.0
#include "session/plugin_host.hpp"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "plugins/config_tree.hpp"
#include "session/stack_walk.hpp"
#include "symbols/kallsyms_table.hpp"

namespace loupe {
namespace {

thread_local std::string t_last_error;

int fail(int status, std::string text) {
  t_last_error = std::move(text);
  return status;
}

void svc_log(loupe_host* h, std::uint32_t level, const char* msg) {
  auto lvl = level >= LOUPE_LOG_ERROR   ? spdlog::level::err
             : level == LOUPE_LOG_WARN  ? spdlog::level::warn
             : level == LOUPE_LOG_INFO  ? spdlog::level::info
             : level == LOUPE_LOG_DEBUG ? spdlog::level::debug
                                        : spdlog::level::trace;
  spdlog::log(lvl, "[{}] {}", h->instance, msg ? msg : "");
}

int svc_feature(loupe_host* h, const char* name, const char** reason) {
  if (!name) return -1;
  static thread_local std::string reason_text;  // host-owned "static" for the caller
  FeatureResult r = h->ctx.features->get(name);
  reason_text = r.reason;
  if (reason) *reason = reason_text.c_str();
  if (r.reason == "unknown feature") return -1;
  return r.available ? 1 : 0;
}

int svc_tracepoint_exists(loupe_host*, const char* cat_name) {
  if (!cat_name) return 0;
  std::string s(cat_name);
  auto colon = s.find(':');
  if (colon == std::string::npos) return 0;
  const std::string tracefs = mount_tracefs().path;
  if (tracefs.empty()) return 0;
  std::string path =
      fmt::format("{}/events/{}/{}/id", tracefs, s.substr(0, colon), s.substr(colon + 1));
  return access(path.c_str(), R_OK) == 0 ? 1 : 0;
}

int svc_ksym_exists(loupe_host*, const char* name) {
  return name && KallsymsTable::contains("/proc/kallsyms", name) ? 1 : 0;
}

int refuse_in_replay(const char* what) {
  return fail(LOUPE_ERR_UNSUPPORTED,
              fmt::format("{}: refused while replaying a capture (the session has no kernel "
                          "side; check loupe_session_info.flags & LOUPE_SESSION_REPLAY)",
                          what));
}

int svc_bpf_load(loupe_host* h, bpf_object* obj) {
  if (h->ctx.replay) return refuse_in_replay("bpf_load");
  if (!obj) return fail(LOUPE_ERR_INVALID_ARG, "bpf_load: NULL object");
  const Status loaded = load_with_verifier_log(obj);
  if (loaded) return LOUPE_OK;
  spdlog::error("[{}] {}", h->instance, loaded.error());
  return fail(LOUPE_ERR_KERNEL, loaded.error());
}

int svc_bpf_attach(loupe_host* h, bpf_program* prog, const char* probe) {
  if (h->ctx.replay) return refuse_in_replay("bpf_attach");
  if (!prog) return fail(LOUPE_ERR_INVALID_ARG, "bpf_attach: NULL program");
  std::string label = probe ? probe : bpf_program__name(prog);
  bpf_link* link = bpf_program__attach(prog);
  int err = link ? 0 : errno;
  h->ctx.links->add(h->instance, label, prog, link, err);
  if (link) return LOUPE_OK;
  return fail(err == EPERM || err == EACCES ? LOUPE_ERR_PERMISSION : LOUPE_ERR_KERNEL,
              fmt::format("attach {} ({}) failed: {}", label, bpf_program__section_name(prog),
                          std::strerror(err)));
}

int svc_adopt_link_at(loupe_host* h, bpf_link* link, bpf_program* prog, const char* probe,
                      const char* target, int err) {
  if (h->ctx.replay) {
    if (link) bpf_link__destroy(link);
    return refuse_in_replay("bpf_adopt_link");
  }
  std::string label = probe ? probe : (prog ? bpf_program__name(prog) : "probe");
  h->ctx.links->add(h->instance, label, prog, link, err, target ? target : "");
  if (link) return LOUPE_OK;
  return fail(LOUPE_ERR_KERNEL,
              fmt::format("attach {} failed: {}", label, std::strerror(err < 0 ? -err : err)));
}

int svc_adopt_link(loupe_host* h, bpf_link* link, bpf_program* prog, const char* probe, int err) {
  return svc_adopt_link_at(h, link, prog, probe, nullptr, err);
}

int svc_ring_register(loupe_host* h, const loupe_ring_spec* spec) {
  if (!spec) return fail(LOUPE_ERR_INVALID_ARG, "ring_register: NULL spec");
  Status added = h->ctx.rings->add_ring(h->instance, *spec);
  if (added) return LOUPE_OK;
  return fail(LOUPE_ERR_INVALID_ARG, added.error());
}

int svc_emit(loupe_host* h, const loupe_record* rec) {
  if (!rec) return fail(LOUPE_ERR_INVALID_ARG, "emit: NULL record");
  std::string bad = check_record(*rec);
  if (!bad.empty()) {
    h->rejected.fetch_add(1, std::memory_order_relaxed);
    h->ctx.bus->count_rejected();
    return fail(LOUPE_ERR_INVALID_ARG, "emit: " + bad);
  }
  std::uint64_t end = h->ctx.window_end_ns.load();
  auto owned = std::make_shared<const OwnedRecord>(*rec, h->plugin, h->ctx.window_start_ns.load(),
                                                   end ? end : clock_ns(LOUPE_CLOCK_REALTIME));
  h->emitted.fetch_add(1, std::memory_order_relaxed);
  h->ctx.bus->publish(owned);
  return LOUPE_OK;
}

int svc_symbolize_stack(loupe_host* h, std::uint32_t pid, std::uint32_t kind,
                        const std::uint64_t* addrs, std::uint32_t n, loupe_frame* out,
                        std::uint32_t max_out, std::uint32_t* n_out) {
  if ((n && !addrs) || (max_out && !out) || !n_out)
    return fail(LOUPE_ERR_INVALID_ARG, "symbolize_stack: NULL arrays");
  if (!h->ctx.symbolizer) return fail(LOUPE_ERR_UNSUPPORTED, "no symbolizer in this session");
  std::vector<loupe_frame> frames;
  h->ctx.symbolizer->symbolize_stack(pid, static_cast<loupe_frame_kind>(kind), addrs, n, &frames);
  *n_out = static_cast<std::uint32_t>(std::min<std::size_t>(frames.size(), max_out));
  std::copy_n(frames.begin(), *n_out, out);
  return LOUPE_OK;
}

int svc_symbolize(loupe_host* h, std::uint32_t pid, std::uint32_t kind, const std::uint64_t* addrs,
                  std::uint32_t n, loupe_frame* out) {
  if (n && (!addrs || !out)) return fail(LOUPE_ERR_INVALID_ARG, "symbolize: NULL arrays");
  if (!h->ctx.symbolizer) return fail(LOUPE_ERR_UNSUPPORTED, "no symbolizer in this session");
  h->ctx.symbolizer->symbolize(pid, static_cast<loupe_frame_kind>(kind), addrs, n, out);
  return LOUPE_OK;
}

int svc_symbolize_data(loupe_host* h, std::uint32_t pid, std::uint64_t addr, loupe_frame* out) {
  if (!out) return fail(LOUPE_ERR_INVALID_ARG, "symbolize_data: NULL frame");
  if (!h->ctx.symbolizer) return fail(LOUPE_ERR_UNSUPPORTED, "no symbolizer in this session");
  h->ctx.symbolizer->symbolize_data(pid, addr, out);
  return LOUPE_OK;
}

int svc_unwind_user(loupe_host* h, std::uint32_t pid, const loupe_user_regs* regs,
                    const void* stack, std::uint32_t stack_len, std::uint64_t* out,
                    std::uint32_t max, std::uint32_t* n_out, std::uint32_t* reason) {
  if (!regs || !n_out || !reason || (max && !out) || (stack_len && !stack))
    return fail(LOUPE_ERR_INVALID_ARG, "unwind_user: NULL argument");
  if (!LOUPE_ABI_HAS_FIELD(regs, loupe_user_regs, regs))
    return fail(LOUPE_ERR_INVALID_ARG, "unwind_user: loupe_user_regs.size too small");
  *n_out = 0;
  *reason = LOUPE_UNWIND_UNSUPPORTED;
  if (!h->ctx.symbolizer) return LOUPE_OK;
  UserUnwind r = h->ctx.symbolizer->unwind_user(pid, *regs, stack, stack_len, out, max);
  *n_out = r.n;
  *reason = r.status;
  return LOUPE_OK;
}

int svc_unwind_tables_attach(loupe_host* h, int rows_fd, int procs_fd) {
  if (h->ctx.replay || !h->ctx.walk)
    return fail(LOUPE_ERR_UNSUPPORTED, "unwind_tables_attach: no unwind tables in this session");
  if (Status st = h->ctx.walk->attach(rows_fd, procs_fd); !st)
    return fail(LOUPE_ERR_INVALID_ARG, st.error());
  return LOUPE_OK;
}

int svc_unwind_files_attach(loupe_host* h, int procs_fd, int files_fd) {
  if (h->ctx.replay || !h->ctx.walk)
    return fail(LOUPE_ERR_UNSUPPORTED, "unwind_files_attach: no unwind tables in this session");
  if (Status st = h->ctx.walk->attach_files(procs_fd, files_fd); !st)
    return fail(LOUPE_ERR_INVALID_ARG, st.error());
  return LOUPE_OK;
}

// A plugin's own copy of the unwinder (built before ABI 1.10, or on a host whose session
// unwinder the kernel refused) keeps its native frames: runtimes write the session's maps
// only, so one interpreter is read once, not once per plugin.
int svc_unwind_python_attach(loupe_host*, int, int, int, int) {
  return fail(LOUPE_ERR_UNSUPPORTED,
              "unwind_python_attach: Python frames are the session unwinder's (ABI 1.10): a "
              "plugin's own unwinder maps get native frames only");
}

int svc_unwinder_maps(loupe_host* h, const loupe_map_ref** maps, std::uint32_t* n) {
  if (!maps || !n) return fail(LOUPE_ERR_INVALID_ARG, "unwinder_maps: NULL outputs");
  if (h->ctx.replay || !h->ctx.walk)
    return fail(LOUPE_ERR_UNSUPPORTED, "unwinder_maps: no unwinder in this session");
  // Rows are 8 bytes since ABI 1.11: a plugin of 1.10 declares 12 and would be refused by
  // the verifier on the session's map. It keeps its own copy, written in its layout.
  if (h->plugin_abi_minor < 11)
    return fail(LOUPE_ERR_UNSUPPORTED,
                "unwinder_maps: the session's rows are ABI 1.11's; a plugin of ABI 1." +
                    std::to_string(h->plugin_abi_minor) + " keeps its own unwinder maps");
  auto refs = h->ctx.walk->maps();
  if (!refs) return fail(LOUPE_ERR_UNSUPPORTED, "unwinder_maps: " + refs.error());
  *maps = (*refs)->data();
  *n = static_cast<std::uint32_t>((*refs)->size());
  return LOUPE_OK;
}

void svc_symbols_invalidate(loupe_host* h, std::uint32_t pid) {
  if (h->ctx.symbolizer) h->ctx.symbolizer->invalidate(pid);
}

std::uint64_t svc_now(loupe_host*, std::uint32_t clock) {
  return clock_ns(clock);
}

std::uint64_t svc_boot_to_wall(loupe_host*, std::uint64_t boot_ns) {
  // Offset sampled per call: both clocks advance together except across suspend.
  std::uint64_t wall = clock_ns(LOUPE_CLOCK_REALTIME);
  std::uint64_t boot = clock_ns(LOUPE_CLOCK_BOOTTIME);
  return wall - boot + boot_ns;
}

const char* svc_last_error(loupe_host*) {
  return t_last_error.c_str();
}

}  // namespace

}  // namespace loupe

loupe_host::loupe_host(loupe::HostContext& c, std::string inst, std::string plug)
    : ctx(c), instance(std::move(inst)), plugin(std::move(plug)) {
  using namespace loupe;
  services.size = sizeof(services);
  services.abi_major = LOUPE_ABI_MAJOR;
  services.abi_minor = LOUPE_ABI_MINOR;
  services.host = this;
  services.log = svc_log;
  services.config_bool = config_bool;
  services.config_int = config_int;
  services.config_float = config_float;
  services.config_string = config_string;
  services.config_list_len = config_list_len;
  services.config_list_string = config_list_string;
  services.config_list_int = config_list_int;
  services.config_list_table = config_list_table;
  services.feature_available = svc_feature;
  services.tracepoint_exists = svc_tracepoint_exists;
  services.ksym_exists = svc_ksym_exists;
  services.bpf_load = svc_bpf_load;
  services.bpf_attach = svc_bpf_attach;
  services.bpf_adopt_link = svc_adopt_link;
  services.ring_register = svc_ring_register;
  services.emit = svc_emit;
  services.symbolize = svc_symbolize;
  services.now_ns = svc_now;
  services.boot_to_wall_ns = svc_boot_to_wall;
  services.last_error = svc_last_error;
  services.symbolize_data = svc_symbolize_data;
  services.symbols_invalidate = svc_symbols_invalidate;
  services.bpf_adopt_link_at = svc_adopt_link_at;
  services.unwind_user = svc_unwind_user;
  services.unwind_tables_attach = svc_unwind_tables_attach;
  services.unwind_files_attach = svc_unwind_files_attach;
  services.unwind_python_attach = svc_unwind_python_attach;
  services.symbolize_stack = svc_symbolize_stack;
  services.unwinder_maps = svc_unwinder_maps;
}
