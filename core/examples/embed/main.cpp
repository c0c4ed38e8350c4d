// SPDX-License-Identifier: Apache-2.0
//
// Runs a profile given as text (argv[1], else a second of system-wide CPU sampling) inside
// this program and counts the records its callback got, by kind. The records arrive on
// the engine's sink thread, so the counters are atomics; run() returns once the final
// report was delivered.
#include <atomic>
#include <cstdio>

#include "loupe/session.hpp"

int main(int argc, char** argv) {
  loupe::SessionOptions opts;
  opts.profile_text = argc > 1 ? argv[1] : R"([session]
duration = 1
[[plugins]]
name = "cpusample"
)";
  std::atomic<unsigned long long> stacks{0}, metrics{0}, health{0}, other{0};
  opts.on_record = [&](const loupe_record& rec) {
    switch (rec.kind) {
      case LOUPE_RECORD_STACK_SAMPLE: ++stacks; break;
      case LOUPE_RECORD_METRIC: ++metrics; break;
      case LOUPE_RECORD_HEALTH: ++health; break;
      default: ++other; break;
    }
  };
  loupe::Session session(std::move(opts));
  const loupe::SessionResult result = session.run();
  std::printf("records: %llu stack, %llu metric, %llu health, %llu other\n", stacks.load(),
              metrics.load(), health.load(), other.load());
  if (result.code != loupe::ExitCode::kOk) {
    std::fprintf(stderr, "%s\n", result.error.c_str());
    return static_cast<int>(result.code);
  }
  return stacks + metrics > 0 ? 0 : 1;
}
