// SPDX-License-Identifier: Apache-2.0
#include "loupe/probe_bench.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "bench_workload.hpp"
#include "empty_probe.hpp"
#include "kernel/probe_stats.hpp"
#include "loupe/session.hpp"
#include "plugins/profile.hpp"

namespace loupe {
namespace {

namespace fs = std::filesystem;

Spread spread(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {v.front(), median, v.back()};
}

// The profile text of one profiler alone, with a jsonl sink into `out_dir`.
std::string single_profile(const PluginSpec& spec, const fs::path& out_dir) {
  toml::table plugin = *static_cast<const toml::table*>(spec.raw.get());
  if (!spec.path.empty()) plugin.insert_or_assign("library", spec.path);
  toml::table root;
  root.insert("session", toml::table{{"duration", 0.0}, {"output_dir", out_dir.string()}});
  root.insert("plugins", toml::array{std::move(plugin)});
  root.insert("sinks", toml::array{toml::table{{"name", "jsonl"}}});
  std::ostringstream os;
  os << root;
  return os.str();
}

struct Timed {
  SessionResult result;
  double ns_per_iteration = 0;
};

// Runs `work` while a session of `profile_text` has every probe attached.
template <typename Work>
Timed under_session(const std::string& profile_text, const BenchOptions& opts, Work work) {
  SessionOptions so;
  so.profile_text = profile_text;
  so.extra_plugin_dirs = opts.extra_plugin_dirs;
  so.stats = true;
  std::promise<void> running;
  auto running_f = running.get_future();
  so.on_running = [&running] { running.set_value(); };
  Session session(std::move(so));
  Timed out;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    out.result = session.run();
    done = true;
  });
  while (!done.load() &&
         running_f.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
  }
  if (running_f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    out.ns_per_iteration = work();
    session.request_stop();
  }
  runner.join();
  // request_stop() is how every bench session ends: not a failure here.
  if (out.result.code == ExitCode::kInterrupted) out.result.code = ExitCode::kOk;
  return out;
}

struct Plan {
  std::unique_ptr<BenchLoop> loop;
  std::vector<std::string>
      hooks;  // where the empty programs go: category:name, raw_tp:NAME, uprobe:FILE+0xOFF
  std::set<std::string>
      targets;  // the profiler's link targets the loop fires, once per iteration each
};

// What drives one probe: which kind of loop, which member of it (the syscall, function or
// block event the probe sits on; empty = every syscall), and where an empty program goes.
struct Driver {
  std::string kind;  // as BenchLoop::kind()
  std::string member;
  std::string hook;
};

// "uprobe:/usr/lib/libc.so.6+0x9a0e0" → the function a built-in loop calls at that address,
// or "" with *why set.
std::string uprobe_function(const std::string& target, std::string* why) {
  auto colon = target.find(':');
  auto plus = target.rfind('+');
  if (colon == std::string::npos || plus == std::string::npos || plus < colon) {
    *why = "cannot read the uprobe's file and offset from the link info";
    return {};
  }
  std::string path = target.substr(colon + 1, plus - colon - 1);
  std::uint64_t offset = std::strtoull(target.c_str() + plus + 1, nullptr, 0);
  auto addr = self_address_of(path, offset);
  std::optional<std::string> fn = addr ? UserCallWorkload::function_at(*addr) : std::nullopt;
  if (!fn) {
    std::string known;
    for (const auto& f : UserCallWorkload::functions()) known += (known.empty() ? "" : ", ") + f;
    *why = fmt::format(
        "no built-in loop calls the function at {}+{:#x} (uprobe loops call libc's {}); "
        "`loupe run --stats PROFILE -- COMMAND` measures its programs under your own workload",
        path, offset, known);
    return {};
  }
  return *fn;
}

// The link target → its driver, or nullopt with *why. Tracepoint links name the event
// without its category; raw_tp covers tp_btf too (the kernel reports both as raw
// tracepoint links).
std::optional<Driver> driver_for(const std::string& target, std::string* why) {
  if (target.empty()) {
    *why = "the kernel did not say what the link is attached to (link info before 6.6)";
    return std::nullopt;
  }
  if (target.rfind("uprobe:", 0) == 0 || target.rfind("uretprobe:", 0) == 0) {
    std::string fn = uprobe_function(target, why);
    if (fn.empty()) return std::nullopt;
    return Driver{"user call", fn, target};
  }
  if (target == "perf_event") {
    *why = "perf_event sampling fires on a clock, not per event";
    return std::nullopt;
  }
  const bool raw = target.rfind("raw_tp:", 0) == 0;
  if (!raw && target.rfind("tracepoint:", 0) != 0) {
    *why =
        "no built-in loop fires this kind of probe (syscall, block and scheduler tracepoints, "
        "libc uprobes)";
    return std::nullopt;
  }
  std::string name = target.substr(target.find(':') + 1);
  auto hook = [&](const char* category) {
    return raw ? target : std::string(category) + ":" + name;
  };
  if (name == "sys_enter" || name == "sys_exit") return Driver{"syscall", "", hook("raw_syscalls")};
  for (std::string_view prefix : {"sys_enter_", "sys_exit_"})
    if (!raw && name.rfind(prefix, 0) == 0) {
      std::string sc = name.substr(prefix.size());
      if (sc == "accept4" || sc == "accept") return Driver{"tcp", sc, hook("syscalls")};
      if (!SyscallWorkload::find(sc)) {
        *why = fmt::format("no built-in loop makes syscall '{}'", sc);
        return std::nullopt;
      }
      return Driver{"syscall", sc, hook("syscalls")};
    }
  if (name == "block_rq_insert" || name == "block_rq_issue" || name == "block_rq_complete")
    return Driver{"block I/O", name, hook("block")};
  if (name == "sched_switch" || name == "sched_waking")
    return Driver{"scheduler", name, hook("sched")};
  if (name == "inet_sock_set_state" || name == "sock_send_length" || name == "sock_recv_length")
    return Driver{"tcp", name, hook("sock")};
  if (name == "tcp_destroy_sock") return Driver{"tcp", name, hook("tcp")};
  *why =
      "no built-in loop fires this tracepoint deterministically (syscall, block, scheduler "
      "and TCP connection tracepoints, libc uprobes)";
  return std::nullopt;
}

void plan_workloads(BenchProfiler& prof, std::vector<Plan>& plans) {
  std::map<std::string, Driver> drivers;  // target → driver
  std::vector<std::unique_ptr<BenchLoop>> loops;
  auto have_loop = [&](const std::string& name) {
    return std::any_of(loops.begin(), loops.end(),
                       [&](const auto& l) { return l->name() == name; });
  };
  bool raw_syscalls = false;
  for (const auto& p : prof.probes) {
    std::string why;
    std::optional<Driver> d = driver_for(p.target, &why);
    if (!d) {
      prof.skipped.push_back({p.probe, p.target, why});
      continue;
    }
    std::unique_ptr<BenchLoop> loop;
    if (d->kind == "user call")
      loop = UserCallWorkload::calling(d->member);
    else if (d->kind == "syscall" && !d->member.empty())
      loop = SyscallWorkload::find(d->member);
    else if (d->kind == "scheduler" && !have_loop("pipe ping-pong (2 threads, 1 CPU)")) {
      loop = ContextSwitchWorkload::create(&why);
      if (!loop) {
        prof.skipped.push_back({p.probe, p.target, why});
        continue;
      }
    } else if (d->kind == "tcp" && !have_loop("loopback TCP connect+accept+close")) {
      loop = LoopbackConnectWorkload::create(&why);
      if (!loop) {
        prof.skipped.push_back({p.probe, p.target, why});
        continue;
      }
    } else if (d->kind == "block I/O" && !have_loop("O_DIRECT 4 KiB read")) {
      loop = BlockReadWorkload::create(&why);
      if (!loop) {
        prof.skipped.push_back({p.probe, p.target, why});
        continue;
      }
    }
    raw_syscalls = raw_syscalls || (d->kind == "syscall" && d->member.empty());
    drivers.emplace(p.target, *d);
    if (loop && !have_loop(loop->name())) loops.push_back(std::move(loop));
  }
  // Probes on every syscall: the cheapest syscall (what every other syscall of the system
  // pays) and a cached file read (what a file profiler's own events cost).
  if (raw_syscalls) {
    if (!have_loop("getppid")) loops.push_back(SyscallWorkload::find("getppid"));
    std::string why;
    if (auto read = CachedReadWorkload::create(&why); read && !have_loop(read->name()))
      loops.push_back(std::move(read));
  }
  // A loop fires every probe on one of its members (a calloc+free loop fires the probes on
  // free too; mmap+munmap both syscalls' tracepoints), and a syscall loop the raw ones.
  for (auto& loop : loops) {
    Plan plan;
    const auto& members = loop->members();
    for (const auto& [target, d] : drivers) {
      bool fires = d.kind == loop->kind() &&
                   ((d.kind == "syscall" && d.member.empty()) ||
                    std::find(members.begin(), members.end(), d.member) != members.end());
      if (!fires || !plan.targets.insert(target).second) continue;
      plan.hooks.push_back(d.hook);
    }
    plan.loop = std::move(loop);
    plans.push_back(std::move(plan));
  }
}

// Σ over the profiler's programs linked to the plan's targets of mean ns per run × the
// targets each is linked to (one program shared by several hooks runs once per hook and
// iteration), and the programs' runs.
std::pair<double, double> program_cost(const std::vector<ProgramStats>& stats,
                                       const std::set<std::string>& targets) {
  std::map<std::uint32_t, std::pair<double, std::set<std::string>>> by_prog;  // avg ns, targets
  std::map<std::uint32_t, double> runs;
  for (const auto& s : stats) {
    if (!targets.count(s.target)) continue;
    auto& e = by_prog[s.prog_id];
    e.first = s.avg_ns();
    e.second.insert(s.target);
    runs[s.prog_id] = static_cast<double>(s.run_cnt);
  }
  double ns = 0, total_runs = 0;
  for (const auto& [id, e] : by_prog) ns += e.first * static_cast<double>(e.second.size());
  for (const auto& [id, r] : runs) total_runs += r;
  return {ns, total_runs};
}

void bench_workload(const Plan& plan, const std::string& profile_text, const BenchOptions& opts,
                    BenchWorkload& out) {
  const BenchLoop& workload = *plan.loop;
  out.loop = workload.name();
  out.kind = workload.kind();
  out.hooks = plan.hooks;
  EmptyProbe empty_probe;
  auto attach_empty = [&] {
    for (const auto& hook : plan.hooks) {
      std::string err = empty_probe.attach(hook);
      if (!err.empty()) throw std::runtime_error(err);
    }
  };
  // Calibrated with the empty programs attached: a uprobe trap costs microseconds, and a
  // loop sized without it would run for minutes.
  attach_empty();
  out.iterations = workload.calibrate(static_cast<std::uint64_t>(opts.loop_seconds * 1e9));
  empty_probe.detach();
  const double n = static_cast<double>(out.iterations);
  auto loop = [&] { return static_cast<double>(workload.run(out.iterations)) / n; };
  std::vector<double> none, empty, with, vs_none, vs_empty, bpf, empty_bpf, runs;
  for (unsigned rep = 0; rep < opts.reps; ++rep) {
    double t_none = 0, t_empty = 0, t_loupe = 0;
    for (unsigned k = 0; k < 3; ++k) {
      switch ((rep + k) % 3) {  // rotate the order: drift and warm-up hit each variant alike
        case 0: t_none = loop(); break;
        case 1: {
          attach_empty();
          ProgramStats before = empty_probe.stats();
          t_empty = loop();
          ProgramStats after = empty_probe.stats();
          empty_probe.detach();
          double r = static_cast<double>(after.run_cnt - before.run_cnt);
          double per_run =
              r > 0 ? static_cast<double>(after.run_time_ns - before.run_time_ns) / r : 0;
          empty_bpf.push_back(per_run * static_cast<double>(plan.hooks.size()));
          break;
        }
        case 2: {
          Timed t = under_session(profile_text, opts, loop);
          if (t.result.code != ExitCode::kOk || t.ns_per_iteration == 0)
            throw std::runtime_error(
                fmt::format("the profiler's session failed: {}", t.result.error));
          t_loupe = t.ns_per_iteration;
          auto [ns, r] = program_cost(t.result.probe_stats, plan.targets);
          bpf.push_back(ns);
          runs.push_back(r / n);
          break;
        }
      }
    }
    none.push_back(t_none);
    empty.push_back(t_empty);
    with.push_back(t_loupe);
    vs_none.push_back(t_loupe - t_none);
    vs_empty.push_back(t_loupe - t_empty);
  }
  out.none_ns = spread(none);
  out.empty_ns = spread(empty);
  out.loupe_ns = spread(with);
  out.added_vs_none_ns = spread(vs_none);
  out.added_vs_empty_ns = spread(vs_empty);
  out.bpf_ns = spread(bpf);
  out.empty_bpf_ns = spread(empty_bpf);
  out.runs_per_iteration = spread(runs);
}

nlohmann::json spread_json(const Spread& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

}  // namespace

BenchReport run_probe_bench(const BenchOptions& opts) {
  if (opts.reps == 0) throw std::invalid_argument("--reps must be at least 1");
  Profile profile = parse_profile_file(opts.profile_path);
  BenchReport report;
  report.profile = opts.profile_path;
  report.reps = opts.reps;
  report.cpus = static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN));
  utsname u{};
  if (uname(&u) == 0) report.kernel = std::string(u.release);
  ProbeStats stats;  // the empty programs' counts
  if (Status st = stats.enable(); !st) throw std::runtime_error(st.error());
  const fs::path out_dir = fs::temp_directory_path() / fmt::format("loupe-bench-{}", getpid());
  std::map<std::string, int> seen;
  for (const auto& spec : profile.plugins) {
    if (spec.kind != PluginSpec::Kind::kProfiler || !spec.enabled) continue;
    BenchProfiler prof;
    int n = seen[spec.name]++;
    prof.instance = n == 0 ? spec.name : fmt::format("{}#{}", spec.name, n + 1);
    const std::string text = single_profile(spec, out_dir);
    // Discovery: what does the profiler attach to?
    Timed d = under_session(text, opts, [] { return 1.0; });
    if (d.result.code != ExitCode::kOk) {
      prof.error = d.result.error.empty() ? "the profiler's session failed" : d.result.error;
      report.profilers.push_back(std::move(prof));
      continue;
    }
    prof.probes = d.result.probe_stats;
    std::vector<Plan> plans;
    plan_workloads(prof, plans);
    for (const auto& plan : plans) {
      BenchWorkload w;
      try {
        spdlog::info("bench {}: {} loop", prof.instance, plan.loop->name());
        bench_workload(plan, text, opts, w);
        prof.workloads.push_back(std::move(w));
      } catch (const std::exception& e) {
        prof.skipped.push_back({plan.loop->name() + " loop", "", e.what()});
      }
    }
    report.profilers.push_back(std::move(prof));
  }
  std::error_code ec;
  fs::remove_all(out_dir, ec);
  return report;
}

std::string BenchReport::json() const {
  nlohmann::json profs = nlohmann::json::array();
  for (const auto& p : profilers) {
    nlohmann::json probes = nlohmann::json::array(), workloads = nlohmann::json::array(),
                   skipped = nlohmann::json::array();
    for (const auto& s : p.probes)
      probes.push_back({{"probe", s.probe}, {"program", s.program}, {"target", s.target}});
    for (const auto& w : p.workloads)
      workloads.push_back(
          {{"loop", w.loop},
           {"kind", w.kind},
           {"hooks", w.hooks},
           {"iterations", w.iterations},
           {"ns_per_iteration",
            {{"none", spread_json(w.none_ns)},
             {"empty_program", spread_json(w.empty_ns)},
             {"loupe", spread_json(w.loupe_ns)}}},
           {"added_ns_per_iteration",
            {{"vs_none", spread_json(w.added_vs_none_ns)},
             {"vs_empty_program", spread_json(w.added_vs_empty_ns)}}},
           {"bpf_stats_ns_per_iteration",
            {{"loupe", spread_json(w.bpf_ns)}, {"empty_program", spread_json(w.empty_bpf_ns)}}},
           {"program_runs_per_iteration", spread_json(w.runs_per_iteration)}});
    for (const auto& s : p.skipped)
      skipped.push_back({{"probe", s.probe}, {"target", s.target}, {"reason", s.reason}});
    nlohmann::json j{{"instance", p.instance},
                     {"probes", probes},
                     {"workloads", workloads},
                     {"skipped", skipped}};
    if (!p.error.empty()) j["error"] = p.error;
    profs.push_back(j);
  }
  return nlohmann::json{
      {"schema", "loupe.bench/2"}, {"profile", profile}, {"reps", reps}, {"cpus", cpus},
      {"kernel", kernel},          {"profilers", profs}}
      .dump(2);
}

std::string BenchReport::text() const {
  std::string out = fmt::format(
      "loupe bench {} ({} reps, kernel {}, {} CPUs); ns per loop iteration, min / median / max\n",
      profile, reps, kernel, cpus);
  auto row = [&](const char* what, const Spread& s) {
    out += fmt::format("    {:<34} {:>9.1f} {:>9.1f} {:>9.1f}\n", what, s.min, s.median, s.max);
  };
  for (const auto& p : profilers) {
    out += fmt::format("\n{}\n", p.instance);
    if (!p.error.empty()) out += fmt::format("  error: {}\n", p.error);
    for (const auto& w : p.workloads) {
      std::string hooks;
      for (const auto& t : w.hooks) hooks += (hooks.empty() ? "" : ", ") + t;
      out += fmt::format("  {} loop ({}), {} iterations; fires {}\n", w.loop, w.kind, w.iterations,
                         hooks);
      row("no probe", w.none_ns);
      row("empty program on the same hooks", w.empty_ns);
      row("loupe session", w.loupe_ns);
      row("added vs no probe", w.added_vs_none_ns);
      row("added vs empty program", w.added_vs_empty_ns);
      row("bpf stats: profiler programs", w.bpf_ns);
      row("bpf stats: empty programs", w.empty_bpf_ns);
      row("program runs per iteration", w.runs_per_iteration);
    }
    for (const auto& s : p.skipped)
      out += fmt::format("  skipped {} ({}): {}\n", s.probe, s.target.empty() ? "-" : s.target,
                         s.reason);
  }
  return out;
}

}  // namespace loupe
