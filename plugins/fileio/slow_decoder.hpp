// SPDX-License-Identifier: Apache-2.0
//
// fileslower's view: each operation at or above slow_us as an EVENT `file_slow` with its
// file (named from the kernel's path table at decode time, so a file deleted since keeps
// its name), position, sizes, latency and user stack (fp frames from the record, or a
// stack copy unwound here with unwind = "dwarf"). Runs on a core worker thread.
#ifndef LOUPE_FILEIO_SLOW_DECODER_HPP
#define LOUPE_FILEIO_SLOW_DECODER_HPP

#include <cstdint>
#include <vector>

#include "loupe/sdk/host.hpp"
#include "loupe/sdk/ustack.hpp"

namespace loupe::fileio {

class SlowDecoder {
 public:
  SlowDecoder(const sdk::Host& host, int paths_fd)
      : host_(host), paths_fd_(paths_fd), unwinder_(host) {}

  int decode(const void* data, std::uint32_t len);

  const sdk::UstackUnwinder& unwinder() const { return unwinder_; }

 private:
  sdk::Host host_;
  int paths_fd_;
  sdk::UstackUnwinder unwinder_;
  std::vector<std::uint64_t> unwound_;  // reused: one decode at a time per ring
};

}  // namespace loupe::fileio

#endif  // LOUPE_FILEIO_SLOW_DECODER_HPP
