// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the plugins' own ring decoders: whatever bytes a BPF program (or a corrupted
// capture under `loupe replay`) puts in a record that passed the core's header check, the
// decoder must neither read out of bounds nor emit a malformed record. The first byte picks
// the decoder; the rest is cut into records of exactly the size the plugin registered
// (as the core delivers them), sometimes one short (a decoder must refuse it).
//
//   latency     lat_outlier_event   → outlier events with stacks (any n_user/n_kernel, target)
//   biolat      bio_outlier_event   → slow_request events (any dev, op, comm bytes)
//   jitregions  jr_event            → the region table, then a report over that state
//   lockwait    lw_first_seen_event → lock names and stack lookups (no stack map: fd -1)
//
// The host is a table of stubs: emit() runs the core's check_record() (a plugin emitting a
// record the host would refuse is a bug: trap) and deep-copies the record as the host does,
// so ASan sees every byte it points to; symbolize() answers some addresses with a name.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "biolat/biolat.h"
#include "biolat/outlier_decoder.hpp"
#include "dispatch/owned_record.hpp"
#include "jitregions/jit_tracker.hpp"
#include "jitregions/jitregions.h"
#include "latency/latency.h"
#include "latency/outlier_decoder.hpp"
#include "lockwait/lockwait.h"
#include "lockwait/symbol_cache.hpp"
#include "loupe/sdk/ring.hpp"

namespace {

// Host-owned symbol strings live until destroy(): here, for the whole run.
const char* name_for(std::uint64_t addr) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int i = 0; i < 256; ++i) v.push_back("fn_" + std::to_string(i));
    return v;
  }();
  return names[(addr >> 4) & 0xff].c_str();
}

void stub_log(loupe_host*, std::uint32_t, const char*) {}
const char* stub_last_error(loupe_host*) {
  return "stub";
}
std::uint64_t stub_boot_to_wall(loupe_host*, std::uint64_t ns) {
  return ns;
}
std::uint64_t stub_now(loupe_host*, std::uint32_t) {
  return 1;
}

int stub_emit(loupe_host*, const loupe_record* rec) {
  if (!rec) __builtin_trap();
  std::string why = loupe::check_record(*rec);
  if (!why.empty()) __builtin_trap();  // the plugin built a record the host would refuse
  loupe::OwnedRecord copy(*rec, "fuzz", 1, 2);
  return LOUPE_OK;
}

// Addresses ending in 0 resolve through the symbol table, in 1 through a perf map (a JIT
// name), in 2 fail outright; the rest are unresolved with a module.
int stub_symbolize(loupe_host*, std::uint32_t, std::uint32_t kind, const std::uint64_t* addrs,
                   std::uint32_t n, loupe_frame* out) {
  if (n && (addrs[0] & 0xf) == 2) return LOUPE_ERR_NOT_FOUND;
  for (std::uint32_t i = 0; i < n; ++i) {
    out[i] = loupe_frame{};
    out[i].address = addrs[i];
    out[i].kind = kind;
    switch (addrs[i] & 0xf) {
      case 0:
      case 1:
        out[i].symbol = name_for(addrs[i]);
        out[i].module = "/fuzz/module.so";
        out[i].offset = addrs[i] & 0xff;
        out[i].resolution = (addrs[i] & 0xf) == 0 ? LOUPE_RESOLVED_SYMTAB : LOUPE_RESOLVED_PERF_MAP;
        break;
      default: out[i].module = "/fuzz/module.so"; out[i].resolution = LOUPE_UNRESOLVED_NO_SYMBOL;
    }
  }
  return LOUPE_OK;
}

int stub_symbolize_data(loupe_host* h, std::uint32_t pid, std::uint64_t addr, loupe_frame* out) {
  return stub_symbolize(h, pid, LOUPE_FRAME_USER, &addr, 1, out) == LOUPE_OK && out->symbol ? 1 : 0;
}

loupe_host_services make_services() {
  loupe_host_services s{};
  s.size = sizeof(s);
  s.abi_major = LOUPE_ABI_MAJOR;
  s.abi_minor = LOUPE_ABI_MINOR;
  s.log = stub_log;
  s.emit = stub_emit;
  s.symbolize = stub_symbolize;
  s.now_ns = stub_now;
  s.boot_to_wall_ns = stub_boot_to_wall;
  s.last_error = stub_last_error;
  s.symbolize_data = stub_symbolize_data;
  return s;
}

const loupe_host_services kServices = make_services();

// Feeds `decode` records of `size` bytes, each in an exactly sized heap block so a read past
// the record is an ASan report; one in eight is a byte short.
template <typename Decode>
void feed(FuzzedDataProvider& in, std::size_t size, Decode decode) {
  while (in.remaining_bytes() > 0) {
    std::size_t len = in.ConsumeIntegralInRange(0, 7) == 0 ? size - 1 : size;
    std::vector<std::uint8_t> bytes = in.ConsumeBytes<std::uint8_t>(len);
    if (bytes.size() < len) bytes.resize(len, 0);
    std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[len]);
    std::memcpy(exact.get(), bytes.data(), len);
    int rc = decode(exact.get(), static_cast<std::uint32_t>(len));
    if (len < size && rc == LOUPE_OK) __builtin_trap();  // a short record must be refused
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const loupe::sdk::Host host(&kServices);
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: {
      std::vector<loupe::latency::TargetLabels> targets = {{"read", "tracepoint"},
                                                           {"malloc", "uprobe"}};
      loupe::latency::OutlierDecoder d(host, targets);
      feed(in, sizeof(lat_outlier_event), [&](const void* p, std::uint32_t n) {
        return loupe::sdk::guarded_decode<loupe::latency::OutlierDecoder>(&d, p, n);
      });
      break;
    }
    case 1: {
      loupe::biolat::OutlierDecoder d(host, "tracepoint");
      feed(in, sizeof(bio_outlier_event), [&](const void* p, std::uint32_t n) {
        return loupe::sdk::guarded_decode<loupe::biolat::OutlierDecoder>(&d, p, n);
      });
      break;
    }
    case 2: {
      loupe::jitregions::TableLimits limits;
      limits.max_processes = 4;  // small, so the bounds are reached
      limits.max_regions = 16;
      limits.max_retired = 4;
      loupe::jitregions::JitTracker t(host, limits);
      feed(in, sizeof(jr_event), [&](const void* p, std::uint32_t n) {
        return loupe::sdk::guarded_decode<loupe::jitregions::JitTracker>(&t, p, n);
      });
      t.report(false, 1, 2);
      t.report(true, 1, 3);
      break;
    }
    case 3: {
      loupe::lockwait::SymbolCache c(host, -1, -1, LW_STACK_DEPTH);
      feed(in, sizeof(lw_first_seen_event), [&](const void* p, std::uint32_t n) {
        return loupe::sdk::guarded_decode<loupe::lockwait::SymbolCache>(&c, p, n);
      });
      break;
    }
  }
  return 0;
}
