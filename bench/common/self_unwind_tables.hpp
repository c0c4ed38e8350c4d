// SPDX-License-Identifier: Apache-2.0
//
// For benches of unwind = "tables": a plugin object whose programs use the in-kernel unwinder
// (bpf/include/loupe/unwind.bpf.h), sized as the plugin sizes it, and after load filled with
// this process's own unwind tables by the core's UnwindTables, as a session does for its
// target. Link loupe_core and add core/src to the include path.
#ifndef LOUPE_BENCH_SELF_UNWIND_TABLES_HPP
#define LOUPE_BENCH_SELF_UNWIND_TABLES_HPP

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "session/unwind_tables.hpp"

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
template <typename Skel>
std::unique_ptr<loupe::UnwindTables> load_self_unwind_tables(Skel* s) {
  auto t = std::make_unique<loupe::UnwindTables>();
  if (auto st = t->attach(bpf_map__fd(s->maps.loupe_unwind_rows),
                          bpf_map__fd(s->maps.loupe_unwind_procs));
      !st)
    throw std::runtime_error("unwind tables: " + st.error());
  t->track(static_cast<std::uint32_t>(getpid()));
  t->refresh();
  if (t->counters().processes != 1) throw std::runtime_error("unwind tables: none written");
  return t;
}

}  // namespace loupe_bench

#endif  // LOUPE_BENCH_SELF_UNWIND_TABLES_HPP
