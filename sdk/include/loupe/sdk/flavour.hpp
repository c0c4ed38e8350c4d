// SPDX-License-Identifier: Apache-2.0
//
// Which flavour of a kernel tracepoint a profiler attaches to, chosen by probing: tp_btf
// (typed arguments, cheapest), else raw_tp, else the classic tracepoint (needs tracefs and
// the event's format). A plugin offers the `mechanism` key, builds one BPF program per
// flavour and hook, and autoloads the chosen column only.
//
//   constexpr auto kKeys = sdk::concat_keys(kOwnKeys, sdk::kMechanismKey, ...);
//   std::uint32_t m = sdk::choose_flavour(host, cfg.value_string("mechanism"), "sched",
//                                         {"sched_switch", "sched_waking"});
//   // m: sdk::kTpBtf, sdk::kRawTp or sdk::kTracepoint
#ifndef LOUPE_SDK_FLAVOUR_HPP
#define LOUPE_SDK_FLAVOUR_HPP

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "loupe/abi/config.h"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

inline constexpr std::uint32_t kTpBtf = 0;
inline constexpr std::uint32_t kRawTp = 1;
inline constexpr std::uint32_t kTracepoint = 2;
inline constexpr const char* kFlavourNames[] = {"tp_btf", "raw_tp", "tracepoint"};

inline constexpr const char* kMechanismChoices[] = {"auto", "tp_btf", "raw_tp", "tracepoint",
                                                    nullptr};
// The host refuses any other value before setup(), with the profile's file:line:col.
inline constexpr loupe_config_key kMechanismKey = {
    "mechanism",
    LOUPE_CFG_STRING,
    0,
    "\"auto\"",
    "hook flavour: \"auto\" (tp_btf, else raw_tp, else tracepoint), or force one of them",
    0,
    0,
    nullptr,
    0,
    0,
    kMechanismChoices};

// The first flavour the host can attach (or `wanted` when it can), for the tracepoints
// `category`:`hooks`; `wanted` is the validated value of kMechanismKey. Throws sdk::Error:
// UNSUPPORTED with every flavour's reason when none works, NOT_FOUND when the classic
// tracepoint is the choice and one of the events is absent; std::logic_error for a
// `wanted` outside kMechanismChoices (the schema lets none through).
inline std::uint32_t choose_flavour(const Host& host, const std::string& wanted,
                                    const std::string& category,
                                    std::initializer_list<const char*> hooks) {
  std::string reasons;
  for (std::uint32_t m = kTpBtf; m <= kTracepoint; ++m) {
    const char* feature = kFlavourNames[m];
    if (wanted != "auto" && wanted != feature) continue;
    std::string why;
    if (host.feature(feature, &why)) {
      if (m == kTracepoint)
        for (const char* h : hooks)
          if (!host.tracepoint_exists(category + ":" + h))
            throw Error(LOUPE_ERR_NOT_FOUND,
                        "tracepoint " + category + ":" + h + " not found (is tracefs mounted?)");
      return m;
    }
    reasons += std::string(reasons.empty() ? "" : "; ") + feature + ": " + why;
  }
  if (reasons.empty())
    throw std::logic_error("choose_flavour: \"" + wanted + "\" is not one of kMechanismChoices");
  throw Error(LOUPE_ERR_UNSUPPORTED,
              "no usable hook for the " + category + " tracepoints (" + reasons + ")");
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_FLAVOUR_HPP
