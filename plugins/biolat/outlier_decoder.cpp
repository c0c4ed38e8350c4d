// SPDX-License-Identifier: Apache-2.0
#include "outlier_decoder.hpp"

#include <cstring>

#include "bio_labels.hpp"
#include "biolat.h"
#include "loupe/sdk/records.hpp"

namespace loupe::biolat {

OutlierDecoder::OutlierDecoder(const sdk::Host& host, std::string mechanism)
    : host_(host), mechanism_(std::move(mechanism)) {}

int OutlierDecoder::decode(const void* data, std::uint32_t len) {
  bio_outlier_event e;
  if (len < sizeof(e)) return LOUPE_ERR_INVALID_ARG;
  std::memcpy(&e, data, sizeof(e));
  char comm[BIO_COMM_LEN + 1] = {};
  std::memcpy(comm, e.comm, BIO_COMM_LEN);
  std::string device = devices_.name(e.dev);
  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "slow_request");
  rb.label("device", device).label("op", op_name(e.op)).label("mechanism", mechanism_);
  rb.event_time(host_.boot_to_wall_ns(e.boot_ns))
      .field("device", device)
      .field("dev", dev_string(e.dev))
      .field_u("sector", e.sector)
      .field_u("bytes", e.bytes)
      .field("op", std::string(op_name(e.op)))
      .field("sync", static_cast<std::int64_t>(e.sync))
      .field_u("latency_ns", e.total_ns)
      .field_u("queue_ns", e.queue_ns)
      .field_u("service_ns", e.service_ns)
      .field("pid", static_cast<std::int64_t>(e.pid))
      .field("tid", static_cast<std::int64_t>(e.tid))
      .field("comm", std::string(comm))
      .field("error", static_cast<std::int64_t>(e.error));
  return rb.emit(host_);
}

}  // namespace loupe::biolat
