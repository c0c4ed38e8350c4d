// SPDX-License-Identifier: Apache-2.0
//
// The kernel's symbol table as /proc/kallsyms shows it: text (or data) symbols of vmlinux,
// modules and BPF programs, sorted by address. Loaded once; names live as long as the table.
#ifndef LOUPE_SYMBOLS_KALLSYMS_TABLE_HPP
#define LOUPE_SYMBOLS_KALLSYMS_TABLE_HPP

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loupe {

struct KernelSymbol {
  const char* name;    // owned by the table
  const char* module;  // "[kernel]", "[ext4]", "[bpf]"...; owned by the table
  std::uint64_t offset;
};

class KallsymsTable {
 public:
  // Reads `path`. Unreadable or all-zero addresses (kptr_restrict, no CAP_SYSLOG) leave
  // the table empty; `empty_reason()` says why.
  enum class Kind { kText, kData };
  KallsymsTable(const std::string& path, Kind kind);

  // The symbol whose range holds `addr`; nullopt-like (name == nullptr) when none does.
  // `*in_kernel` tells whether the address is inside the kernel's text at all.
  KernelSymbol lookup(std::uint64_t addr, bool* in_kernel) const;

  std::size_t size() const { return entries_.size(); }

  // Whether `path` names a symbol `name` at all. Needs no addresses, so it answers even
  // where kptr_restrict zeroes them; one streaming pass, no table kept.
  static bool contains(const std::string& path, std::string_view name);
  const std::string& empty_reason() const { return empty_reason_; }

 private:
  struct Entry {
    std::uint64_t addr;
    std::uint32_t name;    // offset into names_
    std::uint32_t module;  // offset into names_
  };
  std::uint32_t intern_module(std::string_view module);

  std::vector<Entry> entries_;
  std::string names_;  // NUL-separated; never reallocated after construction
  std::vector<std::pair<std::string, std::uint32_t>> modules_;
  std::string empty_reason_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_KALLSYMS_TABLE_HPP
