// SPDX-License-Identifier: Apache-2.0
//
// Turns a slow-request ring record into an EVENT record (device, sector, size, op,
// latencies, pid, comm). Runs on a core worker thread, possibly while collect() runs, so
// it keeps its own device-name table.
#ifndef LOUPE_BIOLAT_OUTLIER_DECODER_HPP
#define LOUPE_BIOLAT_OUTLIER_DECODER_HPP

#include <cstdint>
#include <string>

#include "device_names.hpp"
#include "loupe/sdk/host.hpp"

namespace loupe::biolat {

class OutlierDecoder {
 public:
  OutlierDecoder(const sdk::Host& host, std::string mechanism);

  // The ring's decoder (sdk::register_fixed_ring): one slow-request record.
  int decode(const void* data, std::uint32_t len);

 private:
  sdk::Host host_;
  std::string mechanism_;
  DeviceNames devices_;
};

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_OUTLIER_DECODER_HPP
