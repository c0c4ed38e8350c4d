// SPDX-License-Identifier: Apache-2.0
#include "unwind/file_rows.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "symbols/eh_frame_ranges.hpp"
#include "symbols/elf_file.hpp"

#ifdef LOUPE_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#endif

namespace loupe {

const loupe_unwind_row* FileRows::find(std::uint64_t pc) const {
  if (pc > std::numeric_limits<std::uint32_t>::max()) return nullptr;
  auto it = std::upper_bound(rows.begin(), rows.end(), pc,
                             [](std::uint64_t p, const loupe_unwind_row& r) { return p < r.pc; });
  if (it == rows.begin()) return nullptr;
  return &*(it - 1);
}

bool FileRows::bias_for(std::uint64_t map_start, std::uint64_t file_offset,
                        std::uint64_t* bias) const {
  for (const auto& s : segments) {
    // Mappings start page-aligned: the segment may begin inside the mapping's first page.
    const std::uint64_t page_off = s.offset & ~std::uint64_t{0xfff};
    if (file_offset < page_off || file_offset >= s.offset + s.filesz) continue;
    *bias = map_start - (s.vaddr - (s.offset - file_offset));
    return true;
  }
  return false;
}

#ifdef LOUPE_HAVE_LIBDW
namespace {

constexpr int kRbp = 6;
constexpr int kRsp = 7;
constexpr int kRip = 16;
constexpr int kRdi = 5;

bool fits32(std::int64_t v) {
  return v >= std::numeric_limits<std::int32_t>::min() &&
         v <= std::numeric_limits<std::int32_t>::max();
}

// "caller's register at CFA + off" (DW_CFA_offset): libdw spells it call_frame_cfa, then
// plus_uconst off (two's complement) unless off is 0. Sets `*off`.
bool saved_at_cfa(const Dwarf_Op* ops, std::size_t nops, std::int64_t* off) {
  if (nops == 0 || nops > 2 || ops[0].atom != DW_OP_call_frame_cfa) return false;
  *off = 0;
  if (nops == 2) {
    if (ops[1].atom != DW_OP_plus_uconst) return false;
    *off = static_cast<std::int64_t>(ops[1].number);
  }
  return true;
}

// "caller's register is in register `reg`" (DW_CFA_register): libdw spells it as the
// register itself, DW_OP_regx or DW_OP_bregx with offset 0.
bool in_register(const Dwarf_Op* ops, std::size_t nops, unsigned reg) {
  if (nops != 1 && !(nops == 2 && ops[1].atom == DW_OP_stack_value)) return false;
  if (ops[0].atom == DW_OP_regx) return ops[0].number == reg;
  if (ops[0].atom == DW_OP_bregx) return ops[0].number == reg && ops[0].number2 == 0;
  return ops[0].atom == DW_OP_reg0 + reg;
}

// The linker's PLT rule: rsp + 8 + ((rip & 15) >= N) << 3. Returns N, or -1.
int plt_threshold(const Dwarf_Op* ops, std::size_t nops) {
  if (nops != 9) return -1;
  const bool shape =
      ops[0].atom == DW_OP_breg7 && ops[0].number == 8 && ops[1].atom == DW_OP_breg16 &&
      ops[1].number == 0 && ops[2].atom == DW_OP_lit15 && ops[3].atom == DW_OP_and &&
      ops[4].atom >= DW_OP_lit0 && ops[4].atom <= DW_OP_lit15 && ops[5].atom == DW_OP_ge &&
      ops[6].atom == DW_OP_lit3 && ops[7].atom == DW_OP_shl && ops[8].atom == DW_OP_plus;
  return shape ? ops[4].atom - DW_OP_lit0 : -1;
}

// A row's rule before it is packed into loupe_unwind_row::rule.
struct Rule {
  std::uint32_t cfa = LOUPE_UNWIND_CFA_UNSUPPORTED;
  std::uint32_t rbp = LOUPE_UNWIND_RBP_SAME;
  std::int64_t rbp_off = 0;
  std::int64_t cfa_off = 0;
};

// The rule of `frame`; counts the kinds the kernel side does not unwind by rule.
Rule classify_rule(Dwarf_Frame* frame, bool signal, FileRowsStats* st) {
  Rule row;
  if (signal) {
    row.cfa = LOUPE_UNWIND_CFA_SIGNAL;
    ++st->signal;
    return row;
  }
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  std::size_t nops = 0;
  // The outermost frame (_start, clone's child, start_thread) marks its return address
  // undefined: the walk ends there.
  if (dwarf_frame_register(frame, kRip, mem, &ops, &nops) == 0 && nops == 0 && ops == mem) {
    row.cfa = LOUPE_UNWIND_CFA_END;
    return row;
  }
  std::int64_t ra_off = 0;
  const bool ra_in_rdi = in_register(ops, nops, kRdi);
  const bool ra_ok = ra_in_rdi || (nops > 0 && saved_at_cfa(ops, nops, &ra_off) && ra_off == -8);

  Dwarf_Op* cfa_ops = nullptr;
  std::size_t cfa_nops = 0;
  if (dwarf_frame_cfa(frame, &cfa_ops, &cfa_nops) != 0 || cfa_nops == 0 || !ra_ok) {
    ++st->unsupported;
    return row;
  }
  if (cfa_nops == 1 && cfa_ops[0].atom == DW_OP_bregx &&
      (cfa_ops[0].number == kRsp || cfa_ops[0].number == kRbp) &&
      fits32(static_cast<std::int64_t>(cfa_ops[0].number2)) &&
      (!ra_in_rdi || cfa_ops[0].number == kRsp)) {
    row.cfa = cfa_ops[0].number == kRsp ? LOUPE_UNWIND_CFA_RSP : LOUPE_UNWIND_CFA_RBP;
    if (ra_in_rdi) row.cfa = LOUPE_UNWIND_CFA_RSP_RA_RDI;
    row.cfa_off = static_cast<std::int64_t>(cfa_ops[0].number2);
  } else if (int n = plt_threshold(cfa_ops, cfa_nops); n >= 0) {
    row.cfa = LOUPE_UNWIND_CFA_PLT;
    row.cfa_off = n;
    ++st->plt;
  } else {
    ++st->unsupported;
    return row;
  }

  if (dwarf_frame_register(frame, kRbp, mem, &ops, &nops) != 0) {
    row = {};
    ++st->unsupported;
    return row;
  }
  std::int64_t rbp_off = 0;
  if (nops == 0) {
    row.rbp = ops == mem ? LOUPE_UNWIND_RBP_UNDEFINED : LOUPE_UNWIND_RBP_SAME;
  } else if (saved_at_cfa(ops, nops, &rbp_off)) {
    row.rbp = LOUPE_UNWIND_RBP_AT_CFA;
    row.rbp_off = rbp_off;
  } else if (ops[0].atom == DW_OP_bregx && ops[0].number == kRbp && ops[0].number2 == 0 &&
             nops == 1) {
    row.rbp = LOUPE_UNWIND_RBP_SAME;  // same as "rbp is rbp"
  } else {
    row = {};
    ++st->unsupported;
  }
  return row;
}

// The packed row of `frame`: a rule whose offsets do not fit the row is unsupported too.
loupe_unwind_row classify(Dwarf_Frame* frame, bool signal, FileRowsStats* st) {
  const Rule r = classify_rule(frame, signal, st);
  loupe_unwind_row row{};
  const bool fits = fits32(r.cfa_off) && fits32(r.rbp_off) &&
                    loupe_unwind_rule(r.cfa, r.rbp, static_cast<std::int32_t>(r.rbp_off),
                                      static_cast<std::int32_t>(r.cfa_off), &row.rule);
  if (!fits) {
    ++st->unsupported;
    loupe_unwind_rule(LOUPE_UNWIND_CFA_UNSUPPORTED, LOUPE_UNWIND_RBP_SAME, 0, 0, &row.rule);
  }
  return row;
}

// The file and its call-frame information, released in that order's reverse.
struct ElfHandle {
  explicit ElfHandle(const std::string& path) : file(path), elf(file.get()) {}
  ~ElfHandle() {
    if (cfi) dwarf_cfi_end(cfi);
  }
  ElfFile file;
  Elf* elf;
  Dwarf_CFI* cfi = nullptr;
};

}  // namespace

Status build_file_rows(const std::string& path, FileRows* out) {
  *out = {};
  ElfHandle h(path);
  GElf_Ehdr ehdr;
  if (!h.file.header(&ehdr))
    return make_error(path + ": " + (h.file.valid() ? "no ELF header" : h.file.error()));
  if (ehdr.e_machine != EM_X86_64) {
    return make_error(path + ": not x86-64");
  }
  std::size_t nphdr = 0;
  if (elf_getphdrnum(h.elf, &nphdr) == 0)
    for (std::size_t i = 0; i < nphdr; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(h.elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        out->segments.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz, (ph.p_flags & PF_X) != 0});
    }
  const std::vector<FdeRange> fdes = h.file.eh_frame_ranges();
  h.cfi = dwarf_getcfi_elf(h.elf);
  if (fdes.empty() || !h.cfi) {
    return make_error(path + ": no .eh_frame");
  }

  auto& st = out->stats;
  std::vector<loupe_unwind_row> rows;
  auto push = [&](std::uint64_t pc, loupe_unwind_row row) {
    row.pc = static_cast<std::uint32_t>(pc);
    // A row that starts where the previous ends at the same pc replaces it (an FDE
    // starting right at the previous one's end replaces that one's CFA_NONE).
    if (!rows.empty() && rows.back().pc == row.pc) rows.pop_back();
    if (!rows.empty() && rows.back().rule == row.rule) return;
    rows.push_back(row);
  };
  for (const auto& f : fdes) {
    if (f.end > std::numeric_limits<std::uint32_t>::max()) continue;
    if (!rows.empty() && f.start < rows.back().pc) continue;  // overlapping FDEs: keep the first
    ++st.fdes;
    std::uint64_t pc = f.start;
    while (pc < f.end) {
      Dwarf_Frame* frame = nullptr;
      Dwarf_Addr start = 0, end = 0;
      bool signal = false;
      if (dwarf_cfi_addrframe(h.cfi, pc, &frame) != 0 ||
          dwarf_frame_info(frame, &start, &end, &signal) < 0) {
        std::free(frame);
        ++st.failed;
        break;
      }
      push(pc, classify(frame, signal, &st));
      ++st.cfi_rows;
      std::free(frame);
      if (end <= pc) break;
      pc = std::min<std::uint64_t>(end, f.end);
    }
    push(f.end, loupe_unwind_row{});  // rule 0: LOUPE_UNWIND_CFA_NONE
  }
  out->rows = std::move(rows);
  return {};
}

#else

Status build_file_rows(const std::string& path, FileRows* out) {
  *out = {};
  return make_error(path + ": loupe was built without libdw (no unwind tables)");
}

#endif

std::vector<loupe_unwind_row> unwind_page_index(const std::vector<loupe_unwind_row>& rows,
                                                std::uint32_t* base) {
  std::vector<loupe_unwind_row> index;
  if (rows.empty()) return index;
  *base = rows.front().pc & ~(LOUPE_UNWIND_PAGE_SIZE - 1);
  const std::uint64_t pages = ((rows.back().pc - *base) >> LOUPE_UNWIND_PAGE_SHIFT) + 1;
  index.resize(pages + 1);
  std::uint32_t in_force = 0;  // the last row at or below the page's start
  for (std::uint64_t k = 0; k < pages; ++k) {
    const std::uint64_t start = *base + (k << LOUPE_UNWIND_PAGE_SHIFT);
    while (in_force + 1 < rows.size() && rows[in_force + 1].pc <= start) ++in_force;
    index[k].pc = in_force;
  }
  index[pages].pc = static_cast<std::uint32_t>(rows.size() - 1);
  return index;
}

}  // namespace loupe
