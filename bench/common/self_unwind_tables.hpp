// SPDX-License-Identifier: Apache-2.0
//
// For benches of unwind = "tables": a plugin object whose programs use the in-kernel unwinder
// (bpf/include/loupe/unwind.bpf.h), sized as the plugin sizes it, and after load filled with
// this process's own unwind tables by the core's ProcessTables, as a session does for its
// target. Link loupe_core and add core/src to the include path.
#ifndef LOUPE_BENCH_SELF_UNWIND_TABLES_HPP
#define LOUPE_BENCH_SELF_UNWIND_TABLES_HPP

#include <bpf/libbpf.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "unwind/process_tables.hpp"

namespace loupe_bench {

// Before load: the unwinder's maps at the plugins' defaults (unwind_rows, max_stacks).
template <typename Skel>
void size_self_unwind_maps(Skel* s, std::uint32_t rows = 262144, std::uint32_t stacks = 16384) {
  bpf_map__set_max_entries(s->maps.loupe_unwind_rows, rows);
  bpf_map__set_max_entries(s->maps.loupe_unwind_procs, 1024);
  bpf_map__set_max_entries(s->maps.loupe_unwind_stacks, stacks);
  bpf_map__set_max_entries(s->maps.loupe_unwind_slots, stacks);
  s->rodata->loupe_unwind_max_stacks = stacks;
}

// After load: this process's tables in the object's maps; kept while the result lives.
// Refreshed as a session refreshes its target at each tick until every file this process
// maps has its rows: they are built on ProcessTables' own thread, and the process's entry is
// written (by that thread) only once a file of it is back, so a single refresh writes none.
// Bounded: a builder that never finishes is an error, not a bench without tables.
template <typename Skel>
std::unique_ptr<loupe::ProcessTables> load_self_unwind_tables(Skel* s, double timeout_s = 60) {
  auto t = std::make_unique<loupe::ProcessTables>();
  if (auto st = t->attach(bpf_map__fd(s->maps.loupe_unwind_rows),
                          bpf_map__fd(s->maps.loupe_unwind_procs));
      !st)
    throw std::runtime_error("unwind tables: " + st.error());
  t->track(static_cast<std::uint32_t>(getpid()));
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  loupe::ProcessTables::Counters c;
  for (;;) {
    t->refresh();
    c = t->counters();
    if (c.processes == 1 && c.pending == 0) break;
    if (std::chrono::steady_clock::now() >= end)
      throw std::runtime_error("unwind tables: not written in " + std::to_string(timeout_s) +
                               " s (" + std::to_string(c.processes) + " process entries, " +
                               std::to_string(c.files) + " files built, " +
                               std::to_string(c.pending) + " pending)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (c.write_errors)
    throw std::runtime_error("unwind tables: " + std::to_string(c.write_errors) +
                             " map writes failed");
  std::fprintf(
      stderr, "unwind tables of this process: %llu files (%llu without rows), %llu rows, %.0f ms\n",
      static_cast<unsigned long long>(c.files), static_cast<unsigned long long>(c.files_failed),
      static_cast<unsigned long long>(c.rows),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return t;
}

}  // namespace loupe_bench

#endif  // LOUPE_BENCH_SELF_UNWIND_TABLES_HPP
