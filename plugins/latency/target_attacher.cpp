// SPDX-License-Identifier: Apache-2.0
#include "target_attacher.hpp"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "latency.h"
#include "latency.skel.h"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/uprobe.hpp"

namespace loupe::latency {
namespace {

bpf_program* fentry_prog(latency_bpf* s, int slot, bool exit) {
  bpf_program* entry[LAT_FENTRY_SLOTS] = {s->progs.lat_fentry_0, s->progs.lat_fentry_1,
                                          s->progs.lat_fentry_2, s->progs.lat_fentry_3};
  bpf_program* ret[LAT_FENTRY_SLOTS] = {s->progs.lat_fexit_0, s->progs.lat_fexit_1,
                                        s->progs.lat_fexit_2, s->progs.lat_fexit_3};
  return exit ? ret[slot] : entry[slot];
}

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

}  // namespace

TargetAttacher::TargetAttacher(const sdk::Host& host, latency_bpf* skel, int uprobe_pid)
    : host_(host), skel_(skel), uprobe_pid_(uprobe_pid) {}

void TargetAttacher::prepare(const std::vector<ResolvedTarget>& targets) {
  bool uses[5] = {};
  bool usdt_pair = false, usdt_count = false;
  for (const auto& t : targets) {
    usdt_pair |= t.spec.kind == TargetKind::kUsdtPair;
    usdt_count |= t.spec.kind == TargetKind::kUsdtCount;
  }
  for (const auto& t : targets) uses[static_cast<int>(t.mechanism)] = true;
  auto& p = skel_->progs;
  bpf_program__set_autoload(p.lat_uprobe_entry, uses[static_cast<int>(Mechanism::kUprobe)]);
  bpf_program__set_autoload(p.lat_uprobe_exit, uses[static_cast<int>(Mechanism::kUprobe)]);
  bpf_program__set_autoload(p.lat_kprobe_entry, uses[static_cast<int>(Mechanism::kKprobe)]);
  bpf_program__set_autoload(p.lat_kprobe_exit, uses[static_cast<int>(Mechanism::kKprobe)]);
  bpf_program__set_autoload(p.lat_tp_entry, uses[static_cast<int>(Mechanism::kTracepoint)]);
  bpf_program__set_autoload(p.lat_tp_exit, uses[static_cast<int>(Mechanism::kTracepoint)]);
  bpf_program__set_autoload(p.lat_usdt_entry, usdt_pair);
  bpf_program__set_autoload(p.lat_usdt_exit, usdt_pair);
  bpf_program__set_autoload(p.lat_usdt_count, usdt_count);
  for (int slot = 0; slot < LAT_FENTRY_SLOTS; ++slot) {
    bpf_program__set_autoload(fentry_prog(skel_, slot, false), false);
    bpf_program__set_autoload(fentry_prog(skel_, slot, true), false);
  }
  for (unsigned i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    if (t.mechanism != Mechanism::kFentry) continue;
    skel_->rodata->targ_fentry_target[t.fentry_slot] = i;
    for (bool exit : {false, true}) {
      bpf_program* prog = fentry_prog(skel_, t.fentry_slot, exit);
      bpf_program__set_autoload(prog, true);
      int err = bpf_program__set_attach_target(prog, 0, t.spec.kernel_function.c_str());
      if (err)
        throw sdk::Error(LOUPE_ERR_NOT_FOUND, "target '" + t.spec.name +
                                                  "': no BTF for kernel "
                                                  "function '" +
                                                  t.spec.kernel_function +
                                                  "': " + errno_text(-err));
    }
  }
}

void TargetAttacher::attach(const std::vector<ResolvedTarget>& targets) {
  for (unsigned i = 0; i < targets.size(); ++i) attach_one(targets[i], i);
}

// The exit half is attached first: an exit without its entry is counted and harmless,
// while an entry without its exit would make the thread's next calls look nested.
void TargetAttacher::attach_one(const ResolvedTarget& t, unsigned index) {
  auto& p = skel_->progs;
  const std::string label = t.probe_label();
  for (bool exit : {true, false}) {
    if (exit && t.spec.kind == TargetKind::kUsdtCount) continue;  // one probe, no exit
    bpf_link* link = nullptr;
    bpf_program* prog = nullptr;
    std::string target;  // for kernels whose link info does not name it (before 6.6)
    // A tracepoint pair's two sides are two events: each side names its own, so the label
    // says where the link is even where the kernel's link info does not (before 6.6).
    std::string probe =
        (t.mechanism == Mechanism::kTracepoint
             ? "tracepoint:" + (exit ? t.spec.exit : t.spec.entry).full()
         : t.mechanism == Mechanism::kUsdt
             ? "usdt:" + t.binary_path + ":" + (exit ? t.spec.usdt_exit : t.spec.usdt_entry).full()
             : label) +
        (exit ? ":exit" : ":entry");
    if (t.spec.kind == TargetKind::kUsdtCount) probe = label;
    switch (t.mechanism) {
      case Mechanism::kUprobe: {
        LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = index, .retprobe = exit);
        prog = exit ? p.lat_uprobe_exit : p.lat_uprobe_entry;
        link = bpf_program__attach_uprobe_opts(prog, uprobe_pid_, t.binary_path.c_str(),
                                               t.file_offset, &o);
        target = sdk::uprobe_target(t.binary_path, t.file_offset, exit);
        break;
      }
      case Mechanism::kKprobe: {
        LIBBPF_OPTS(bpf_kprobe_opts, o, .bpf_cookie = index, .retprobe = exit);
        prog = exit ? p.lat_kprobe_exit : p.lat_kprobe_entry;
        link = bpf_program__attach_kprobe_opts(prog, t.spec.kernel_function.c_str(), &o);
        break;
      }
      case Mechanism::kTracepoint: {
        LIBBPF_OPTS(bpf_tracepoint_opts, o, .bpf_cookie = index);
        const auto& tp = exit ? t.spec.exit : t.spec.entry;
        prog = exit ? p.lat_tp_exit : p.lat_tp_entry;
        link = bpf_program__attach_tracepoint_opts(prog, tp.category.c_str(), tp.name.c_str(), &o);
        break;
      }
      case Mechanism::kUsdt: {
        // libbpf reads the notes, attaches one uprobe per site and handles semaphores.
        LIBBPF_OPTS(bpf_usdt_opts, o, .usdt_cookie = index);
        const UsdtName& u = exit ? t.spec.usdt_exit : t.spec.usdt_entry;
        prog = t.spec.kind == TargetKind::kUsdtCount ? p.lat_usdt_count
               : exit                                ? p.lat_usdt_exit
                                                     : p.lat_usdt_entry;
        link = bpf_program__attach_usdt(prog, uprobe_pid_, t.binary_path.c_str(),
                                        u.provider.c_str(), u.name.c_str(), &o);
        target = "usdt:" + t.binary_path + ":" + u.full();
        break;
      }
      case Mechanism::kFentry:
        prog = fentry_prog(skel_, t.fentry_slot, exit);
        link = bpf_program__attach_trace(prog);
        break;
    }
    int err = link ? 0 : errno;
    host_.adopt_link(link, prog, probe, err, target);
    if (!link)
      throw sdk::Error(LOUPE_ERR_KERNEL, "target '" + t.spec.name + "': attaching " + probe +
                                             " failed: " + errno_text(err));
  }
}

}  // namespace loupe::latency
