// SPDX-License-Identifier: Apache-2.0
#include "slow_decoder.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "fileio.h"
#include "fileio_reporter.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::fileio {

int SlowDecoder::decode(const void* data, std::uint32_t len) {
  fio_slow e;
  if (len < sizeof(e)) return LOUPE_ERR_INVALID_ARG;
  std::memcpy(&e, data, sizeof(e));
  std::vector<std::uint64_t> user;
  if (e.type == FIO_RECORD_SLOW_DWARF) {
    if (len < sizeof(fio_slow_dwarf)) return LOUPE_ERR_INVALID_ARG;
    const auto* r = static_cast<const fio_slow_dwarf*>(data);
    const auto stack_len = len - static_cast<std::uint32_t>(sizeof(fio_slow_dwarf));
    if (r->us.stack_len != stack_len) return LOUPE_ERR_INVALID_ARG;
    unwound_.clear();
    if (r->us.regs[LOUPE_USTACK_REG_SP]) unwinder_.unwind(e.pid, r->us, r + 1, stack_len, unwound_);
    user.assign(unwound_.begin(),
                unwound_.begin() + static_cast<std::ptrdiff_t>(
                                       std::min<std::size_t>(unwound_.size(), FIO_STACK_DEPTH)));
  } else if (e.n_user > 0) {
    user.assign(e.user_stack,
                e.user_stack +
                    std::min<std::uint32_t>(static_cast<std::uint32_t>(e.n_user), FIO_STACK_DEPTH));
  }
  std::vector<loupe_frame> frames(user.size());
  if (!user.empty() &&
      host_.symbolize(e.pid, LOUPE_FRAME_USER, user.data(), static_cast<std::uint32_t>(user.size()),
                      frames.data()) != LOUPE_OK) {
    for (std::size_t i = 0; i < user.size(); ++i) {
      frames[i] = loupe_frame{};
      frames[i].address = user[i];
      frames[i].kind = LOUPE_FRAME_USER;
      frames[i].resolution = LOUPE_UNRESOLVED_NOT_ATTEMPTED;
    }
  }

  fio_file id{};
  id.ino = e.ino;
  id.dev = e.dev;
  fio_path p{};
  const std::string path =
      bpf_map_lookup_elem(paths_fd_, &id, &p) == 0 ? path_text(p) : std::string("(unnamed)");
  char comm[FIO_COMM_LEN + 1] = {};
  std::memcpy(comm, e.comm, FIO_COMM_LEN);

  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "file_slow");
  rb.label("op", op_name(e.op));
  rb.event_time(host_.boot_to_wall_ns(e.boot_ns))
      .field("path", path)
      .field("file", file_label(e.dev, e.ino))
      .field("op", op_name(e.op))
      .field_u("latency_ns", e.latency_ns)
      .field("pid", static_cast<std::int64_t>(e.pid))
      .field("tid", static_cast<std::int64_t>(e.tid))
      .field("comm", std::string(comm));
  if (e.ret >= 0)
    rb.field("bytes", static_cast<std::int64_t>(e.ret));
  else
    rb.field("errno", errno_name(static_cast<int>(-e.ret)));
  if (e.requested) rb.field_u("requested", e.requested);
  if (e.offset != ~std::uint64_t{0}) rb.field_u("offset", e.offset);
  if (e.n_user < 0) rb.field("user_stack_error", static_cast<std::int64_t>(e.n_user));
  if (!frames.empty()) rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
  return rb.emit(host_);
}

}  // namespace loupe::fileio
