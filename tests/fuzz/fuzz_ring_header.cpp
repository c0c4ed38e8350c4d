// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the dispatcher's minimal decode (the header check every ring record passes
// before a plugin's decoder sees it): a ring spec's bounds and a record of any length,
// copied into an exactly sized buffer so a read past the record is an ASan report.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dispatch/ring_dispatcher.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  loupe_ring_spec spec{};
  spec.size = sizeof(spec);
  spec.record_type = in.ConsumeIntegralInRange<std::uint16_t>(0, 3);
  spec.record_version = in.ConsumeIntegralInRange<std::uint16_t>(0, 3);
  spec.min_len = in.ConsumeIntegralInRange<std::uint32_t>(0, 64);
  spec.max_len = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::uint32_t>(0, 256);
  std::vector<std::uint8_t> rec = in.ConsumeRemainingBytes<std::uint8_t>();
  // A header claiming exactly the record's length reaches the later checks more often.
  if (rec.size() >= sizeof(loupe_ring_header) && (rec[0] & 1)) {
    auto len = static_cast<std::uint32_t>(rec.size());
    std::memcpy(rec.data() + offsetof(loupe_ring_header, len), &len, sizeof(len));
  }
  std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[rec.size()]);
  if (!rec.empty()) std::memcpy(exact.get(), rec.data(), rec.size());
  const char* why = loupe::RingDispatcher::check_header(spec, exact.get(), rec.size());
  if (why == nullptr) {
    // Accepted: the record must really be as the spec and its header say.
    loupe_ring_header h;
    std::memcpy(&h, exact.get(), sizeof(h));
    if (rec.size() < sizeof(h) || h.len != rec.size() || h.type != spec.record_type ||
        h.version != spec.record_version || rec.size() < spec.min_len ||
        (spec.max_len && rec.size() > spec.max_len))
      __builtin_trap();
  }
  return 0;
}
