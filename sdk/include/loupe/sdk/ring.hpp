// SPDX-License-Identifier: Apache-2.0
//
// Registering a ring of fixed-size records (one struct per record, as LOUPE_RESERVE
// writes them). `Decoder` provides `int decode(const void* data, uint32_t len)`, called on
// a core worker thread for each record (len = sizeof(Record) after the core's header
// check); an exception it throws is caught here and counted as a decode error, never
// let unwind into the core.
#ifndef LOUPE_SDK_RING_HPP
#define LOUPE_SDK_RING_HPP

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "loupe/sdk/host.hpp"
#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

// The ring spec's decode callback for `Decoder`: the exception firewall around decode().
template <typename Decoder>
int guarded_decode(void* decoder, const void* data, std::uint32_t len) noexcept {
  try {
    return static_cast<Decoder*>(decoder)->decode(data, len);
  } catch (...) {
    return LOUPE_ERR_INTERNAL;
  }
}

struct FixedRing {
  const char* name;
  int map_fd;  // -1 when replaying a capture
  std::uint16_t record_type;
  std::uint16_t record_version;
  loupe_ring_category category;
  int lost_map_fd;     // the ring's `_lost` per-CPU counter, or -1
  int divisor_map_fd;  // the ring's `_divisor` map, or -1 when sampling would corrupt state
};

// Records whose length varies within [min_len, max_len] (a record followed by a copied
// user stack, loupe/ustack.bpf.h). Throws Error naming the ring when the host refuses it.
template <typename Decoder>
void register_variable_ring(const Host& host, const FixedRing& ring, std::uint32_t min_len,
                            std::uint32_t max_len, Decoder* decoder) {
  loupe_ring_spec spec{};
  spec.size = sizeof(spec);
  spec.map_fd = ring.map_fd;
  spec.name = ring.name;
  spec.record_type = ring.record_type;
  spec.record_version = ring.record_version;
  spec.min_len = min_len;
  spec.max_len = max_len;
  spec.category = ring.category;
  spec.policy = LOUPE_BP_DEFAULT;
  spec.lost_map_fd = ring.lost_map_fd;
  spec.divisor_map_fd = ring.divisor_map_fd;
  spec.decode = &guarded_decode<Decoder>;
  spec.user = decoder;
  if (host.register_ring(spec) != LOUPE_OK)
    throw Error(LOUPE_ERR_INTERNAL,
                std::string("registering the ") + ring.name + " ring: " + host.last_error());
}

// Throws Error naming the ring when the host refuses it.
template <typename Record, typename Decoder>
void register_fixed_ring(const Host& host, const FixedRing& ring, Decoder* decoder) {
  register_variable_ring(host, ring, sizeof(Record), sizeof(Record), decoder);
}

// A Decoder for records that need no state of their own: each record, checked to be a
// whole `Record`, goes to `fn` (on the core's ring worker thread).
template <typename Record>
class CallbackDecoder {
 public:
  explicit CallbackDecoder(std::function<void(const Record&)> fn) : fn_(std::move(fn)) {}
  int decode(const void* data, std::uint32_t len) {
    if (len != sizeof(Record)) return LOUPE_ERR_INVALID_ARG;
    fn_(*static_cast<const Record*>(data));
    return LOUPE_OK;
  }

 private:
  std::function<void(const Record&)> fn_;
};

// The session's target pid, after refusing a plugin `pid` key that names another process.
inline std::int64_t session_target_pid(std::int64_t configured_pid,
                                       const loupe_session_info* session) {
  std::int64_t session_pid = session ? session->target_pid : 0;
  if (configured_pid && session_pid && configured_pid != session_pid)
    throw Error(LOUPE_ERR_INVALID_ARG, "pid = " + std::to_string(configured_pid) +
                                           " conflicts with the session's target pid " +
                                           std::to_string(session_pid));
  return session_pid;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_RING_HPP
