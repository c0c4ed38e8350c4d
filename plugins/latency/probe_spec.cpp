// SPDX-License-Identifier: Apache-2.0
#include "probe_spec.hpp"

#include <cctype>
#include <stdexcept>

namespace loupe::latency {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  }
  return true;
}

std::uint64_t parse_offset(const std::string& text, const std::string& whole) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(text, &used, 0);  // base 0: "16", "0x10"
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || text[0] == '-')
    throw std::invalid_argument("bad offset '+" + text + "' in '" + whole +
                                "' (expected +<decimal> or +0x<hex>)");
  return v;
}

}  // namespace

const char* to_string(TargetKind kind) {
  switch (kind) {
    case TargetKind::kKernelFunction: return "kfunc";
    case TargetKind::kUserFunction: return "ufunc";
    case TargetKind::kUsdtPair: return "usdt pair";
    case TargetKind::kUsdtCount: return "usdt";
    case TargetKind::kTracepointPair: return "tracepoint";
    case TargetKind::kSyscall: return "syscall";
  }
  return "?";
}

TracepointName parse_tracepoint(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos)
    throw std::invalid_argument("tracepoint '" + text +
                                "' must be written category:name, e.g. syscalls:sys_enter_read");
  TracepointName tp{text.substr(0, colon), text.substr(colon + 1)};
  if (!is_identifier(tp.category) || !is_identifier(tp.name))
    throw std::invalid_argument("tracepoint '" + text +
                                "' has an empty or invalid category or name");
  return tp;
}

void parse_user_function(const std::string& text, std::string& binary, std::string& symbol,
                         std::uint64_t& offset) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("user function '" + text +
                                "' must be written binary:symbol[+offset], e.g. libc:malloc or "
                                "/usr/bin/app:handle_request");
  binary = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  offset = 0;
  auto plus = rest.find('+');
  if (plus != std::string::npos) {
    offset = parse_offset(rest.substr(plus + 1), text);
    rest.resize(plus);
  }
  if (rest.empty()) throw std::invalid_argument("user function '" + text + "' has an empty symbol");
  for (char c : rest) {
    if (std::isspace(static_cast<unsigned char>(c)))
      throw std::invalid_argument("user function '" + text + "' has a space in its symbol");
  }
  symbol = rest;
}

UsdtName parse_usdt(const std::string& text) {
  auto last = text.rfind(':');
  auto mid = last == std::string::npos || last == 0 ? std::string::npos : text.rfind(':', last - 1);
  if (mid == std::string::npos || mid == 0 || last == text.size() - 1 || last == mid + 1)
    throw std::invalid_argument("USDT probe '" + text +
                                "' must be written binary:provider:name, e.g. "
                                "/usr/bin/python3.11:python:gc__start (`loupe probes BINARY` "
                                "lists them)");
  UsdtName u{text.substr(0, mid), text.substr(mid + 1, last - mid - 1), text.substr(last + 1)};
  if (!is_identifier(u.provider) || !is_identifier(u.name))
    throw std::invalid_argument("USDT probe '" + text + "': provider and name are identifiers");
  return u;
}

TargetSpec parse_target(const TargetFields& f, std::size_t index) {
  const std::string where =
      "targets[" + std::to_string(index) + "]" + (f.name ? " ('" + *f.name + "')" : std::string());
  int kinds = (f.kfunc ? 1 : 0) + (f.ufunc ? 1 : 0) + (f.syscall ? 1 : 0) +
              ((f.tracepoint_entry || f.tracepoint_exit) ? 1 : 0) +
              ((f.usdt_entry || f.usdt_exit) ? 1 : 0) + (f.usdt ? 1 : 0);
  if (kinds != 1)
    throw std::invalid_argument(where +
                                ": set exactly one of kfunc, ufunc, syscall, tracepoint_entry + "
                                "tracepoint_exit, usdt_entry + usdt_exit or usdt (found " +
                                std::to_string(kinds) + ")");

  TargetSpec t;
  try {
    if (f.kfunc) {
      t.kind = TargetKind::kKernelFunction;
      if (!is_identifier(*f.kfunc))
        throw std::invalid_argument("kfunc '" + *f.kfunc + "' is not a kernel symbol name");
      t.kernel_function = *f.kfunc;
      t.spec_text = "kfunc = \"" + *f.kfunc + "\"";
      t.name = *f.kfunc;
    } else if (f.ufunc) {
      t.kind = TargetKind::kUserFunction;
      parse_user_function(*f.ufunc, t.binary, t.symbol, t.symbol_offset);
      t.spec_text = "ufunc = \"" + *f.ufunc + "\"";
      t.name = t.symbol;
    } else if (f.usdt) {
      t.kind = TargetKind::kUsdtCount;
      t.usdt_entry = parse_usdt(*f.usdt);
      t.binary = t.usdt_entry.binary;
      t.spec_text = "usdt = \"" + *f.usdt + "\"";
      t.name = t.usdt_entry.name;
    } else if (f.usdt_entry || f.usdt_exit) {
      if (!f.usdt_entry || !f.usdt_exit)
        throw std::invalid_argument("a USDT pair needs both usdt_entry and usdt_exit");
      t.kind = TargetKind::kUsdtPair;
      t.usdt_entry = parse_usdt(*f.usdt_entry);
      t.usdt_exit = parse_usdt(*f.usdt_exit);
      if (t.usdt_entry.binary != t.usdt_exit.binary)
        throw std::invalid_argument("usdt_entry and usdt_exit name two binaries ('" +
                                    t.usdt_entry.binary + "', '" + t.usdt_exit.binary + "')");
      t.binary = t.usdt_entry.binary;
      t.spec_text = "usdt_entry = \"" + *f.usdt_entry + "\", usdt_exit = \"" + *f.usdt_exit + "\"";
      t.name = t.usdt_entry.name;
    } else if (f.syscall) {
      t.kind = TargetKind::kSyscall;
      std::string s = *f.syscall;
      if (s.rfind("sys_", 0) == 0) s = s.substr(4);
      if (!is_identifier(s))
        throw std::invalid_argument("syscall '" + *f.syscall + "' is not a syscall name");
      t.syscall = s;
      t.entry = {"syscalls", "sys_enter_" + s};
      t.exit = {"syscalls", "sys_exit_" + s};
      t.spec_text = "syscall = \"" + *f.syscall + "\"";
      t.name = s;
    } else {
      if (!f.tracepoint_entry || !f.tracepoint_exit)
        throw std::invalid_argument(
            "a tracepoint pair needs both tracepoint_entry and "
            "tracepoint_exit");
      t.kind = TargetKind::kTracepointPair;
      t.entry = parse_tracepoint(*f.tracepoint_entry);
      t.exit = parse_tracepoint(*f.tracepoint_exit);
      t.spec_text = "tracepoint_entry = \"" + *f.tracepoint_entry + "\", tracepoint_exit = \"" +
                    *f.tracepoint_exit + "\"";
      t.name = t.entry.name;
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  if (f.name) {
    if (f.name->empty()) throw std::invalid_argument(where + ": name is empty");
    t.name = *f.name;
  }
  return t;
}

}  // namespace loupe::latency
