// SPDX-License-Identifier: Apache-2.0
//
// Embedding loupe: run a profile from a C++ program, without the CLI.
//   loupe-embed-example PROFILE [seconds]
// The session searches the same plugin directories as the CLI (LOUPE_PLUGIN_PATH, then
// <exe>/../lib/loupe/plugins). request_stop() may be called from any thread.
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "loupe/session.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROFILE [seconds]\n", argv[0]);
    return 2;
  }
  loupe::SessionOptions opts;
  opts.profile_path = argv[1];
  opts.duration_s = argc > 2 ? std::atof(argv[2]) : 2.0;
  loupe::Session session(std::move(opts));
  loupe::SessionResult result = session.run();  // blocks until the duration ends
  if (result.code != loupe::ExitCode::kOk) {
    std::fprintf(stderr, "session failed (%d): %s\n", static_cast<int>(result.code),
                 result.error.c_str());
    return static_cast<int>(result.code);
  }
  std::printf("session done: %zu probes attached, %llu records published\n", result.probes_attached,
              static_cast<unsigned long long>(result.records_published));
  return 0;
}
