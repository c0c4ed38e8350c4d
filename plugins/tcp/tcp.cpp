// SPDX-License-Identifier: Apache-2.0
//
// tcp: the target's TCP connections, each reported when it closes (addresses, the process
// that opened it and those that served it, lifetime, handshake time, bytes, retransmits,
// resets), and totals per peer and per process. From sock:inet_sock_set_state and the tcp:*
// tracepoints, so it works where kprobes do not (bcc's tcplife and tcpconnlat need them).
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/ring.hpp"
#include "loupe/sdk/skeleton.hpp"
#include "loupe/sdk/target_filter.hpp"
#include "tcp.h"
#include "tcp.skel.h"
#include "tcp_reporter.hpp"

namespace loupe::tcp {
namespace {

constexpr const char* kAcceptHooks[] = {"auto", "fexit", "kprobe", "tracepoint", "off", nullptr};

constexpr loupe_config_key kOwnKeys[] = {
    {"max_connections", LOUPE_CFG_INT, 0, "16384",
     "connections tracked at once (every process's: the owner is known late); more are "
     "counted",
     64, 4194304},
    {"max_peers", LOUPE_CFG_INT, 0, "1024",
     "distinct peers with totals of their own; the rest are summed under one row", 1, 1000000},
    {"app_bytes", LOUPE_CFG_BOOL, 0, "true",
     "the application's send/receive sizes from sock:sock_send_length / sock_recv_length "
     "(kernels that have them; a program run per socket call of every process)"},
    {"accept_hook", LOUPE_CFG_STRING, 0, "\"auto\"",
     "how accept() is seen (accept wait, owner of accepted connections): \"auto\" (fexit, "
     "else kretprobe on inet_csk_accept, else the accept syscalls' tracepoints), one of them, "
     "or \"off\"",
     0, 0, nullptr, 0, 0, kAcceptHooks},
};
constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kTargetFilterKeys);

}  // namespace

class TcpProfiler : public sdk::Profiler {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_ = std::make_unique<sdk::Host>(args.host);
    const auto& cfg = args.config;
    if (!host_->tracepoint_exists("sock:inet_sock_set_state"))
      throw sdk::Error(LOUPE_ERR_NOT_FOUND,
                       "tracepoint sock:inet_sock_set_state not found (is tracefs mounted?)");
    skel_.reset(tcp_bpf__open());
    if (!skel_)
      throw sdk::Error(LOUPE_ERR_KERNEL,
                       std::string("opening the BPF object: ") + std::strerror(errno));
    sdk::apply_target_filter(cfg, args.session, skel_.get());
    const auto max_connections = static_cast<std::uint32_t>(cfg.value_int("max_connections"));
    bpf_map__set_max_entries(skel_->maps.conns, max_connections);
    // Those that found it full, until they end: room for as many again as it holds.
    bpf_map__set_max_entries(skel_->maps.untracked, 2 * max_connections);
    max_peers_ = static_cast<std::size_t>(cfg.value_int("max_peers"));

    // Optional hooks: attached where the kernel has them, said when it does not.
    struct Optional {
      bpf_program* prog;
      const char* tracepoint;
      bool wanted;
    };
    const bool app = cfg.value_bool("app_bytes");
    const Optional optional[] = {
        {skel_->progs.tcp_retransmit, "tcp:tcp_retransmit_skb", true},
        {skel_->progs.tcp_send_reset, "tcp:tcp_send_reset", true},
        {skel_->progs.tcp_receive_reset, "tcp:tcp_receive_reset", true},
        {skel_->progs.tcp_send_length, "sock:sock_send_length", app},
        {skel_->progs.tcp_recv_length, "sock:sock_recv_length", app},
    };
    bool app_tracepoints = app;
    for (const auto& o : optional) {
      const bool on = o.wanted && host_->tracepoint_exists(o.tracepoint);
      bpf_program__set_autoload(o.prog, on);
      if (on)
        hooks_.push_back({o.prog, o.tracepoint});
      else if (o.prog == skel_->progs.tcp_send_length || o.prog == skel_->progs.tcp_recv_length)
        app_tracepoints = false;
      else if (o.wanted)
        host_->warn(std::string("tcp: ") + o.tracepoint +
                    " is not in this kernel: its figures are left out");
    }
    choose_app_bytes(app, app_tracepoints);
    choose_accept_hook(cfg.value_string("accept_hook"));
    if (!host_->tracepoint_exists("tcp:tcp_destroy_sock"))
      throw sdk::Error(LOUPE_ERR_NOT_FOUND,
                       "tracepoint tcp:tcp_destroy_sock not found (Linux 5.3+; is tracefs "
                       "mounted?)");
    hooks_.push_back({skel_->progs.tcp_state, "sock:inet_sock_set_state"});
    hooks_.push_back({skel_->progs.tcp_destroy, "tcp:tcp_destroy_sock"});
  }

  void start(const sdk::StartArgs&) override {
    if (host_->bpf_load(skel_->obj) != LOUPE_OK)
      throw sdk::Error(LOUPE_ERR_KERNEL, "loading the tcp BPF object: " + host_->last_error());
    for (const auto& [prog, tracepoint] : hooks_) {
      if (host_->bpf_attach(prog, tracepoint) != LOUPE_OK)
        throw sdk::Error(LOUPE_ERR_KERNEL, "attaching " + tracepoint + ": " + host_->last_error());
    }
    reporter_ =
        std::make_unique<TcpReporter>(*host_, bpf_map__fd(skel_->maps.counters), max_peers_);
    sdk::register_fixed_ring<tcp_close_event>(
        *host_,
        {"closes", bpf_map__fd(skel_->maps.closes), TCP_RECORD_CLOSE, TCP_RECORD_CLOSE_VERSION,
         LOUPE_RING_MUST_KEEP, bpf_map__fd(skel_->maps.closes_lost), -1},
        reporter_.get());
  }

  void collect(const sdk::CollectArgs& args) override {
    // Totals since the session began (never reset): so is every record's window.
    if (reporter_) reporter_->collect(args.is_final, args.session_start_ns, args.window_end_ns);
  }

 private:
  // Application send/receive sizes: the sock_*_length tracepoints (6.3+), else fexit on
  // tcp_sendmsg / tcp_recvmsg, else said to be left out.
  void choose_app_bytes(bool wanted, bool tracepoints) {
    auto& p = skel_->progs;
    std::string why;
    const bool fexit = wanted && !tracepoints && host_->feature("fexit", &why) &&
                       host_->ksym_exists("tcp_sendmsg") && host_->ksym_exists("tcp_recvmsg");
    bpf_program__set_autoload(p.tcp_sendmsg_fexit, fexit);
    bpf_program__set_autoload(p.tcp_recvmsg_fexit, fexit);
    if (fexit) {
      hooks_.push_back({p.tcp_sendmsg_fexit, "fexit:tcp_sendmsg"});
      hooks_.push_back({p.tcp_recvmsg_fexit, "fexit:tcp_recvmsg"});
    } else if (wanted && !tracepoints) {
      host_->warn(
          "tcp: no sock:sock_send_length / sock_recv_length in this kernel and no fexit "
          "on tcp_sendmsg / tcp_recvmsg (" +
          (why.empty() ? std::string("functions not found") : why) +
          "): application send/receive sizes are left out");
    }
  }

  // The cheapest way this kernel shows accept() returning a socket: fexit, kretprobe (a
  // program per accept only), else the syscalls' exit tracepoints (which put every
  // syscall of every process on the kernel's syscall-tracing path while attached).
  void choose_accept_hook(const std::string& wanted) {
    auto& p = skel_->progs;
    for (bpf_program* prog :
         {p.tcp_accept_fexit, p.tcp_accept_kretprobe, p.tcp_accept4_exit, p.tcp_accept_exit})
      bpf_program__set_autoload(prog, false);
    if (wanted == "off") return;
    std::string reasons, why;
    const bool fn = host_->ksym_exists("inet_csk_accept");
    auto consider = [&](const char* name, bool ok, const std::string& no) {
      if (wanted != "auto" && wanted != name) return false;
      if (!ok) reasons += std::string(reasons.empty() ? "" : "; ") + name + ": " + no;
      return ok;
    };
    if (consider("fexit", fn && host_->feature("fentry", &why), fn ? why : "no inet_csk_accept")) {
      bpf_program__set_autoload(p.tcp_accept_fexit, true);
      hooks_.push_back({p.tcp_accept_fexit, "fexit:inet_csk_accept"});
      accept_hook_ = "fexit";
      return;
    }
    why.clear();
    if (consider("kprobe", fn && host_->feature("kprobe", &why), fn ? why : "no inet_csk_accept")) {
      bpf_program__set_autoload(p.tcp_accept_kretprobe, true);
      hooks_.push_back({p.tcp_accept_kretprobe, "kretprobe:inet_csk_accept"});
      accept_hook_ = "kprobe";
      return;
    }
    const bool tps = host_->tracepoint_exists("syscalls:sys_exit_accept4") &&
                     host_->tracepoint_exists("syscalls:sys_exit_accept");
    if (consider("tracepoint", tps, "no syscalls:sys_exit_accept4 / sys_exit_accept")) {
      bpf_program__set_autoload(p.tcp_accept4_exit, true);
      bpf_program__set_autoload(p.tcp_accept_exit, true);
      hooks_.push_back({p.tcp_accept4_exit, "syscalls:sys_exit_accept4"});
      hooks_.push_back({p.tcp_accept_exit, "syscalls:sys_exit_accept"});
      accept_hook_ = "tracepoint";
      return;
    }
    if (wanted != "auto")
      throw sdk::Error(LOUPE_ERR_UNSUPPORTED, "accept_hook = \"" + wanted + "\": " + reasons);
    host_->warn("tcp: accept() cannot be seen on this kernel (" + reasons +
                "): no accept wait, and accepted connections are owned by their first send, "
                "receive or close");
  }

  std::unique_ptr<sdk::Host> host_;
  std::string accept_hook_ = "off";
  sdk::Skeleton<tcp_bpf> skel_;
  std::vector<std::pair<bpf_program*, std::string>> hooks_;
  std::size_t max_peers_ = 1024;
  std::unique_ptr<TcpReporter> reporter_;
};

}  // namespace loupe::tcp

LOUPE_PROFILER(loupe::tcp::TcpProfiler, "tcp", "0.3.0",
               "TCP connections: lifetime, handshake, bytes, retransmits and resets",
               loupe::tcp::kKeys)
