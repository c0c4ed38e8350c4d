// SPDX-License-Identifier: Apache-2.0
//
// The session's stack walk (core/src/session/stack_walk.hpp), made of the unwind tables'
// host (process_tables.hpp), the one unwinder whose maps every plugin's walk shares
// (session_unwinder.hpp), and the runtimes of the table (runtimes/registry.cpp).
#include <fmt/format.h>

#include "loupe/abi/host.h"  // before loupe/unwind.h
#include "loupe/unwind.h"
#include "runtimes/runtime.hpp"
#include "session/health_report.hpp"
#include "session/stack_walk.hpp"
#include "unwind/process_tables.hpp"
#include "unwind/session_unwinder.hpp"

namespace loupe {

namespace {

class StackWalkParts final : public StackWalk {
 public:
  explicit StackWalkParts(const StackWalkConfig& c) : tables_(c.watch) {
    static const std::map<std::string, std::shared_ptr<const loupe_config>> none;
    unwinder_ = std::make_unique<SessionUnwinder>(
        tables_, *c.watch, make_runtimes(c.proc_root, c.runtimes ? *c.runtimes : none), c.rows);
    SessionUnwinder* u = unwinder_.get();
    tables_.set_runtimes({[u](std::uint32_t pid, const std::vector<MapsEntry>& maps) {
                            return u->update(pid, maps);
                          },
                          [u](std::uint32_t pid) { u->forget(pid); },
                          [u](const std::function<void(std::uint32_t, std::uint32_t)>& rewrite) {
                            u->poll(rewrite);
                          }});
  }

  Status attach(int rows_fd, int procs_fd) override { return tables_.attach(rows_fd, procs_fd); }
  Status attach_files(int procs_fd, int files_fd) override {
    return tables_.attach_files(procs_fd, files_fd);
  }
  Result<const std::vector<loupe_map_ref>*> maps() override { return unwinder_->maps(); }
  bool attached() const override { return tables_.attached(); }
  void track(std::uint32_t pid) override { tables_.track(pid); }
  void track_all() override { tables_.track_all(); }
  void forget(std::uint32_t pid) override { tables_.forget(pid); }
  bool refresh() override { return tables_.refresh(); }
  bool busy() const override { return tables_.busy(); }
  std::size_t prebuild(const std::string& exe) override { return tables_.prebuild(exe); }
  void learn_file(std::uint32_t pid, const std::string& path, std::uint32_t dev_major,
                  std::uint32_t dev_minor, std::uint64_t inode) override {
    tables_.learn_file(pid, path, dev_major, dev_minor, inode);
  }
  std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                     std::uint32_t max) override {
    return unwinder_->name(pid, frame, out, max);
  }
  void tick(const std::vector<pid_t>& processes) override { unwinder_->tick(processes); }
  void before_final_report(const std::vector<pid_t>& processes) override {
    unwinder_->before_final_report(processes);
  }

  std::string summary() const override {
    const auto c = tables_.counters();
    return fmt::format(
        "unwind tables: {} process(es), {} file(s) ({} without tables), {} rows ({} KiB), "
        "built in {:.1f} ms",
        c.processes, c.files, c.files_failed, c.rows, c.rows * sizeof(loupe_unwind_row) / 1024,
        static_cast<double>(c.build_ns) / 1e6);
  }
  void report_health(HealthReport& health) const override {
    if (!tables_.attached()) return;
    const auto c = tables_.counters();
    health.unwind_tables(c.processes, c.files, c.rows, sizeof(loupe_unwind_row), c.rows_full,
                         c.write_errors, c.build_ns, c.pending);
    if (unwinder_->created()) unwinder_->report_health(health);
  }
  std::uint64_t ended_unread() const override {
    return tables_.attached() ? tables_.counters().ended_unread : 0;
  }

 private:
  // The maps every plugin's walk shares, and the runtimes that write theirs: declared
  // before the tables, whose builder thread writes into its maps, so they outlive it.
  std::unique_ptr<SessionUnwinder> unwinder_;
  ProcessTables tables_;
};

}  // namespace

std::unique_ptr<StackWalk> make_stack_walk(const StackWalkConfig& config) {
  return std::make_unique<StackWalkParts>(config);
}

}  // namespace loupe
