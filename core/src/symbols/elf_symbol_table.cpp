// SPDX-License-Identifier: Apache-2.0
#include "symbols/elf_symbol_table.hpp"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>

#include "symbols/elf_file.hpp"

namespace loupe {
namespace {

// Zero-sized symbols (hand-written assembly, _start) run to the next symbol, as perf
// does, but not further than this: past it a frame is more likely in padding or in code
// the table does not describe.
constexpr std::uint64_t kMaxImplicitSize = 64 * 1024;
// How far back a lookup walks to find an enclosing symbol when a smaller one (a local
// label inside a function) sits between it and the address.
constexpr int kMaxNestedWalk = 8;

// Lower rank wins among symbols at one address: sized over unsized, global over weak
// over local, .symtab over .dynsym (same symbol seen twice).
int symbol_rank(const GElf_Sym& sym, bool dynsym) {
  int bind = GELF_ST_BIND(sym.st_info);
  int rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
  if (sym.st_size == 0) rank += 10;
  if (dynsym) rank += 100;
  return rank;
}

}  // namespace

struct ElfSymbolTable::Builder {
  struct Raw {
    ElfSymbol sym;
    int rank;
  };
  ElfSymbolTable& table;
  std::vector<Raw> functions;
  std::vector<Raw> objects;

  // Returns the number of symbols read from sections of type `type`.
  std::size_t read_symbols(Elf* elf, Elf64_Word type) {
    std::size_t n = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type || shdr.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      std::size_t count = shdr.sh_size / shdr.sh_entsize;
      for (std::size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
        if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
        int stt = GELF_ST_TYPE(sym.st_info);
        bool is_func = stt == STT_FUNC || stt == STT_GNU_IFUNC;
        if (!is_func && stt != STT_OBJECT) continue;
        const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
        if (!name || !*name || name[0] == '$') continue;
        auto off = static_cast<std::uint32_t>(table.names_.size());
        table.names_.append(name);
        table.names_.push_back('\0');
        Raw raw{{sym.st_value, sym.st_size, off, type == SHT_DYNSYM},
                symbol_rank(sym, type == SHT_DYNSYM)};
        (is_func ? functions : objects).push_back(raw);
        ++n;
      }
    }
    return n;
  }

  void read_segments(Elf* elf) {
    std::size_t n = 0;
    if (elf_getphdrnum(elf, &n) != 0) return;
    for (std::size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
      table.segments_.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz});
    }
  }

  void read_build_id(Elf* elf) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      GElf_Nhdr nhdr;
      std::size_t off = 0, name_off = 0, desc_off = 0;
      while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
        const char* base = static_cast<const char*>(data->d_buf);
        if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
            std::memcmp(base + name_off, "GNU", 4) == 0) {
          static constexpr char kHex[] = "0123456789abcdef";
          const auto* desc = reinterpret_cast<const unsigned char*>(base + desc_off);
          for (std::size_t i = 0; i < nhdr.n_descsz; ++i) {
            table.build_id_ += kHex[desc[i] >> 4];
            table.build_id_ += kHex[desc[i] & 0xf];
          }
          return;
        }
      }
    }
  }

  static std::vector<ElfSymbol> finish(std::vector<Raw>& raw) {
    std::sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) {
      return a.sym.addr != b.sym.addr ? a.sym.addr < b.sym.addr : a.rank < b.rank;
    });
    std::vector<ElfSymbol> out;
    out.reserve(raw.size());
    for (const Raw& r : raw)
      if (out.empty() || out.back().addr != r.sym.addr) out.push_back(r.sym);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i].size != 0) continue;
      std::uint64_t gap = i + 1 < out.size() ? out[i + 1].addr - out[i].addr : kMaxImplicitSize;
      out[i].size = std::min(gap, kMaxImplicitSize);
    }
    return out;
  }
};

Result<std::shared_ptr<const ElfSymbolTable>> ElfSymbolTable::load(
    int fd, const std::string& debug_root, const DebugLookup& fetched_debug) {
  const ElfFile elf = ElfFile::borrow(fd);
  if (!elf.valid()) return make_error(std::string("not an ELF file: ") + elf_errmsg(-1));
  auto table = std::make_shared<ElfSymbolTable>();
  Builder b{*table, {}, {}};
  b.read_segments(elf.get());
  b.read_build_id(elf.get());
  // What a stripped file still says about where its functions start and end.
  table->fdes_ = elf.eh_frame_ranges();
  table->fdes_.shrink_to_fit();
  table->has_symtab_ = b.read_symbols(elf.get(), SHT_SYMTAB) > 0;
  if (!table->has_symtab_ && table->build_id_.size() > 2) {
    // Distribution packages ship the full table in a -dbgsym file found by build-id.
    std::string path = debug_root + "/usr/lib/debug/.build-id/" + table->build_id_.substr(0, 2) +
                       "/" + table->build_id_.substr(2) + ".debug";
    auto debug_file = [&]() {
      ElfFile local(path);
      if (local.valid() || !fetched_debug) return local;
      const std::string fetched = fetched_debug(table->build_id_);
      return fetched.empty() ? std::move(local) : ElfFile(fetched);
    };
    const ElfFile dbg = debug_file();
    if (dbg.valid()) table->has_symtab_ = b.read_symbols(dbg.get(), SHT_SYMTAB) > 0;
  }
  b.read_symbols(elf.get(), SHT_DYNSYM);
  table->functions_ = Builder::finish(b.functions);
  table->objects_ = Builder::finish(b.objects);
  table->names_.shrink_to_fit();
  return std::shared_ptr<const ElfSymbolTable>(std::move(table));
}

std::optional<std::uint64_t> ElfSymbolTable::bias_for(std::uint64_t map_start,
                                                      std::uint64_t file_offset) const {
  // The mapping's first byte is file offset `file_offset`, which lies in the segment
  // whose page-aligned file range holds it; that byte's link-time address follows.
  for (const ElfSegment& seg : segments_) {
    std::uint64_t aligned = seg.offset & ~std::uint64_t{0xfff};
    if (file_offset < aligned || file_offset >= seg.offset + std::max(seg.filesz, std::uint64_t{1}))
      continue;
    std::uint64_t link_addr = seg.vaddr + file_offset - seg.offset;  // may wrap back by < 1 page
    return map_start - link_addr;
  }
  return std::nullopt;
}

const ElfSymbol* ElfSymbolTable::find(const std::vector<ElfSymbol>& syms, std::uint64_t vaddr) {
  auto it = std::upper_bound(syms.begin(), syms.end(), vaddr,
                             [](std::uint64_t a, const ElfSymbol& s) { return a < s.addr; });
  for (int walked = 0; it != syms.begin() && walked < kMaxNestedWalk; ++walked) {
    --it;
    if (vaddr - it->addr < it->size) return &*it;
  }
  return nullptr;
}

const FdeRange* ElfSymbolTable::find_fde(std::uint64_t vaddr) const {
  auto it = std::upper_bound(fdes_.begin(), fdes_.end(), vaddr,
                             [](std::uint64_t a, const FdeRange& f) { return a < f.start; });
  if (it == fdes_.begin()) return nullptr;
  --it;
  return vaddr < it->end ? &*it : nullptr;
}

std::size_t ElfSymbolTable::memory_bytes() const {
  return sizeof(*this) + (functions_.capacity() + objects_.capacity()) * sizeof(ElfSymbol) +
         segments_.capacity() * sizeof(ElfSegment) + fdes_.capacity() * sizeof(FdeRange) +
         names_.capacity();
}

}  // namespace loupe
