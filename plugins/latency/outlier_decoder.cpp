// SPDX-License-Identifier: Apache-2.0
#include "outlier_decoder.hpp"

#include <algorithm>
#include <cstring>

#include "latency.h"
#include "loupe/sdk/records.hpp"

namespace loupe::latency {

OutlierDecoder::OutlierDecoder(const sdk::Host& host, std::vector<TargetLabels> targets)
    : host_(host), targets_(std::move(targets)), unwinder_(host) {}

int OutlierDecoder::decode(const void* data, std::uint32_t len) {
  lat_outlier_event e;
  if (len < sizeof(e)) return LOUPE_ERR_INVALID_ARG;
  std::memcpy(&e, data, sizeof(e));
  if (e.target >= targets_.size()) return LOUPE_ERR_INVALID_ARG;
  const auto& t = targets_[e.target];
  const bool dwarf = e.type == LAT_RECORD_OUTLIER_DWARF;
  if (dwarf) {
    if (len < sizeof(lat_outlier_dwarf)) return LOUPE_ERR_INVALID_ARG;
    const auto* r = static_cast<const lat_outlier_dwarf*>(data);
    const std::uint32_t stack_len = len - static_cast<std::uint32_t>(sizeof(lat_outlier_dwarf));
    if (r->us.stack_len != stack_len) return LOUPE_ERR_INVALID_ARG;
    unwound_.clear();
    if (r->us.regs[LOUPE_USTACK_REG_SP]) unwinder_.unwind(e.pid, r->us, r + 1, stack_len, unwound_);
  }

  // Leaf first: kernel frames sit above the user frames when both were captured.
  std::vector<loupe_frame> frames;
  auto add = [&](std::uint32_t pid, loupe_frame_kind kind, const __u64* addrs, __s32 n) {
    if (n <= 0) return;
    std::uint32_t count = std::min<std::uint32_t>(static_cast<std::uint32_t>(n), LAT_STACK_DEPTH);
    std::vector<std::uint64_t> a(addrs, addrs + count);
    std::vector<loupe_frame> out(count);
    if (host_.symbolize(pid, kind, a.data(), count, out.data()) != LOUPE_OK) {
      for (std::uint32_t i = 0; i < count; ++i) {
        out[i] = loupe_frame{};
        out[i].address = a[i];
        out[i].kind = kind;
        out[i].resolution = LOUPE_UNRESOLVED_NOT_ATTEMPTED;
      }
    }
    frames.insert(frames.end(), out.begin(), out.end());
  };
  add(0, LOUPE_FRAME_KERNEL, e.kernel_stack, e.n_kernel);
  if (dwarf) {
    std::vector<__u64> u(
        unwound_.begin(),
        unwound_.begin() + std::min<std::size_t>(unwound_.size(), LAT_STACK_DEPTH));
    add(e.pid, LOUPE_FRAME_USER, u.data(), static_cast<__s32>(u.size()));
  } else {
    add(e.pid, LOUPE_FRAME_USER, e.user_stack, e.n_user);
  }

  char comm[LAT_COMM_LEN + 1] = {};
  std::memcpy(comm, e.comm, LAT_COMM_LEN);
  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "outlier");
  rb.label("target", t.name).label("mechanism", t.mechanism);
  rb.event_time(host_.boot_to_wall_ns(e.boot_ns))
      .field("target", t.name)
      .field("pid", static_cast<std::int64_t>(e.pid))
      .field("tid", static_cast<std::int64_t>(e.tid))
      .field("comm", std::string(comm))
      .field_u("duration_ns", e.duration_ns)
      .field("depth", static_cast<std::int64_t>(e.depth));
  if (e.n_user < 0) rb.field("user_stack_error", static_cast<std::int64_t>(e.n_user));
  if (e.n_kernel < 0) rb.field("kernel_stack_error", static_cast<std::int64_t>(e.n_kernel));
  if (!frames.empty()) rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
  return rb.emit(host_);
}

}  // namespace loupe::latency
