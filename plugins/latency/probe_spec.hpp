// SPDX-License-Identifier: Apache-2.0
//
// One latency target as the profile describes it, parsed and checked for shape only
// (nothing is looked up on the machine here: see library_resolver and loupe/sdk/uprobe.hpp).
#ifndef LOUPE_LATENCY_PROBE_SPEC_HPP
#define LOUPE_LATENCY_PROBE_SPEC_HPP

#include <cstdint>
#include <optional>
#include <string>

namespace loupe::latency {

enum class TargetKind {
  kKernelFunction,
  kUserFunction,
  kTracepointPair,
  kSyscall,
  kUsdtPair,   // two USDT probes: entry and exit
  kUsdtCount,  // one USDT probe, counted
};

// "binary:provider:name" of a USDT probe (split at the last two ':').
struct UsdtName {
  std::string binary;
  std::string provider;
  std::string name;
  std::string full() const { return provider + ":" + name; }
};

// "syscalls:sys_enter_read" split in its two halves.
struct TracepointName {
  std::string category;
  std::string name;
  std::string full() const { return category + ":" + name; }
};

struct TargetSpec {
  std::string name;  // the label reports use (target=<name>)
  TargetKind kind = TargetKind::kKernelFunction;
  std::string kernel_function;      // kKernelFunction
  std::string binary;               // kUserFunction, as written: "libc", "/usr/bin/x"
  std::string symbol;               // kUserFunction
  std::uint64_t symbol_offset = 0;  // kUserFunction: "+0x10" after the symbol
  TracepointName entry;             // kTracepointPair and kSyscall
  TracepointName exit;
  std::string syscall;    // kSyscall
  UsdtName usdt_entry;    // kUsdtPair, kUsdtCount (the probe)
  UsdtName usdt_exit;     // kUsdtPair
  std::string spec_text;  // how the profile spelled it, for messages
  // kUsdt*: the entry probe's argument `label_arg` (0-based) reported as label
  // `label_name`; -1 = none.
  int label_arg = -1;
  std::string label_name;
  bool label_string = false;
};

// The keys of one [[plugins.targets]] table; absent keys are nullopt.
struct TargetFields {
  std::optional<std::string> name;
  std::optional<std::string> kfunc;
  std::optional<std::string> ufunc;
  std::optional<std::string> tracepoint_entry;
  std::optional<std::string> tracepoint_exit;
  std::optional<std::string> syscall;
  std::optional<std::string> usdt_entry;
  std::optional<std::string> usdt_exit;
  std::optional<std::string> usdt;
};

// Throws std::invalid_argument naming the target (by position) and what is wrong.
TargetSpec parse_target(const TargetFields& fields, std::size_t index);

// "cat:name" -> parts; throws std::invalid_argument on any other shape.
TracepointName parse_tracepoint(const std::string& text);

// "binary:symbol[+offset]" -> parts (split at the last ':' so paths may hold one).
void parse_user_function(const std::string& text, std::string& binary, std::string& symbol,
                         std::uint64_t& offset);

// "binary:provider:name" -> parts; throws std::invalid_argument on any other shape.
UsdtName parse_usdt(const std::string& text);

const char* to_string(TargetKind kind);

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_PROBE_SPEC_HPP
