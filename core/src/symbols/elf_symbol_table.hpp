// SPDX-License-Identifier: Apache-2.0
//
// What the symbolizer needs from one ELF file, copied out so the file can be closed: its
// function and data symbols (sorted, sized), its PT_LOAD segments (to turn a runtime
// address into a link-time one) and its GNU build-id. Immutable once loaded, so one table
// is shared by every process that maps the file.
#ifndef LOUPE_SYMBOLS_ELF_SYMBOL_TABLE_HPP
#define LOUPE_SYMBOLS_ELF_SYMBOL_TABLE_HPP

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loupe/symbolizer.hpp"
#include "symbols/eh_frame_ranges.hpp"
#include "symbols/elf_dwarf_lines.hpp"
#include "util/result.hpp"

namespace loupe {

struct ElfSymbol {
  std::uint64_t addr;  // link-time virtual address (st_value)
  std::uint64_t size;
  std::uint32_t name;  // offset into the table's name arena
  bool from_dynsym;    // found only in .dynsym (the file has no .symtab for it)
  // The symbolizer's interned, demangled copy of the name, filled on first use under the
  // symbolizer's lock; lets a cache hit skip demangling and hashing.
  mutable const char* interned = nullptr;
};

struct ElfSegment {
  std::uint64_t offset;  // p_offset
  std::uint64_t vaddr;   // p_vaddr
  std::uint64_t filesz;
  std::uint64_t memsz;
};

class ElfSymbolTable {
 public:
  // Reads the ELF open on `fd` (the caller keeps ownership of fd). When the file has no
  // .symtab, the separate debug file /usr/lib/debug/.build-id/xx/yyyy.debug is tried
  // (`debug_root` prefixes that path), then `fetched_debug(build_id)` when given (a file
  // debuginfod delivered; "" = none). An error when `fd` is not a readable ELF file.
  using DebugLookup = std::function<std::string(const std::string& build_id)>;
  static Result<std::shared_ptr<const ElfSymbolTable>> load(int fd, const std::string& debug_root,
                                                            const DebugLookup& fetched_debug = {});

  // Load bias for a mapping of this file that starts at `map_start` with file offset
  // `file_offset` (from /proc/PID/maps): link-time address = runtime address - bias.
  std::optional<std::uint64_t> bias_for(std::uint64_t map_start, std::uint64_t file_offset) const;

  const ElfSymbol* find_function(std::uint64_t vaddr) const { return find(functions_, vaddr); }
  const ElfSymbol* find_object(std::uint64_t vaddr) const { return find(objects_, vaddr); }
  // The .eh_frame FDE whose range holds `vaddr`, for naming code no symbol covers.
  const FdeRange* find_fde(std::uint64_t vaddr) const;
  std::size_t n_fdes() const { return fdes_.size(); }
  std::string_view name(const ElfSymbol& s) const { return names_.data() + s.name; }

  const std::string& build_id() const { return build_id_; }  // lowercase hex; empty if none
  bool has_symtab() const { return has_symtab_; }
  std::size_t n_functions() const { return functions_.size(); }
  std::size_t n_objects() const { return objects_.size(); }
  std::size_t memory_bytes() const;

  // The file's DWARF, opened on the first source-line lookup rather than with the table:
  // most files are never asked for lines. The symbolizer's lock guards it.
  struct LazyDwarf {
    bool tried = false;
    std::unique_ptr<ElfDwarfLines> lines;
    // Answers by link-time address, as the owner interned them: a DWARF scope walk costs
    // ~0.1 ms in a large C++ unit and reports ask for the same top frames repeatedly.
    std::unordered_map<std::uint64_t, std::vector<SourceLocation>> answers;
  };
  LazyDwarf& dwarf() const { return dwarf_; }

 private:
  struct Builder;
  static const ElfSymbol* find(const std::vector<ElfSymbol>& syms, std::uint64_t vaddr);

  std::vector<ElfSymbol> functions_;
  std::vector<ElfSymbol> objects_;
  std::vector<ElfSegment> segments_;
  std::vector<FdeRange> fdes_;  // sorted by start
  std::string names_;
  std::string build_id_;
  bool has_symtab_ = false;
  mutable LazyDwarf dwarf_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_ELF_SYMBOL_TABLE_HPP
