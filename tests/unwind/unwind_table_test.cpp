// SPDX-License-Identifier: Apache-2.0
//
// Unwind tables (unwind/file_rows.cpp) against libdw's own answer, on the
// system's real files, and the walk the kernel does with them (unwind.bpf.h) replayed in
// user space over this process's own captured stack, against the libdwfl unwinder.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "loupe/symbolizer.hpp"
#include "unwind/file_rows.hpp"
#include "unwind/row_store.hpp"
#include "unwind_chain.h"

namespace {

using loupe::FileRows;

// libdw's rule at `pc`, decoded independently of the builder: what the row must say.
struct Expected {
  bool covered = false;  // an FDE holds pc
  bool simple = false;   // CFA = rsp/rbp + off
  std::uint64_t reg = 0;
  std::int64_t off = 0;
  bool signal = false;
  bool ra_undefined = false;
};

Expected libdw_rule(Dwarf_CFI* cfi, std::uint64_t pc) {
  Expected e;
  Dwarf_Frame* frame = nullptr;
  if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) return e;
  e.covered = true;
  Dwarf_Addr start = 0, end = 0;
  dwarf_frame_info(frame, &start, &end, &e.signal);
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  std::size_t nops = 0;
  dwarf_frame_register(frame, 16, mem, &ops, &nops);
  e.ra_undefined = nops == 0 && ops == mem;
  if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx) {
    e.simple = true;
    e.reg = ops[0].number;
    e.off = static_cast<std::int64_t>(ops[0].number2);
  }
  std::free(frame);
  return e;
}

struct Agreement {
  std::size_t sampled = 0, simple = 0, gaps = 0, other = 0;
};

// Samples `n` pcs across the file's rows and checks each row against libdw.
Agreement check_against_libdw(const std::string& path, const FileRows& t, std::size_t n) {
  Agreement a;
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  Dwarf_CFI* cfi = dwarf_getcfi_elf(elf);
  EXPECT_NE(cfi, nullptr);
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint64_t> pick(t.rows.front().pc, t.rows.back().pc - 1);
  for (std::size_t i = 0; i < n && cfi; ++i) {
    // Half the samples at a row's first byte (where rules change), half anywhere.
    std::uint64_t pc = pick(rng);
    if (i % 2 == 0) pc = t.find(pc)->pc;
    const loupe_unwind_row* r = t.find(pc);
    EXPECT_NE(r, nullptr) << path << " pc 0x" << std::hex << pc;
    if (!r) break;
    const Expected e = libdw_rule(cfi, pc);
    ++a.sampled;
    const std::string at = path + " pc 0x" + [&] {
      char b[32];
      std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(pc));
      return std::string(b);
    }();
    if (!e.covered) {
      ++a.gaps;
      EXPECT_EQ(loupe_unwind_row_cfa(r), LOUPE_UNWIND_CFA_NONE) << at;
      continue;
    }
    if (e.signal) {
      EXPECT_EQ(loupe_unwind_row_cfa(r), LOUPE_UNWIND_CFA_SIGNAL) << at;
    } else if (e.ra_undefined) {
      EXPECT_EQ(loupe_unwind_row_cfa(r), LOUPE_UNWIND_CFA_END) << at;
    } else if (e.simple && (e.reg == 7 || e.reg == 6)) {
      ++a.simple;
      // (glibc's vfork keeps its return address in rdi: its own rule, on rsp.)
      if (loupe_unwind_row_cfa(r) != LOUPE_UNWIND_CFA_RSP_RA_RDI || e.reg != 7)
        EXPECT_EQ(loupe_unwind_row_cfa(r), e.reg == 7 ? LOUPE_UNWIND_CFA_RSP : LOUPE_UNWIND_CFA_RBP)
            << at;
      EXPECT_EQ(loupe_unwind_row_cfa_off(r), e.off) << at;
    } else {
      ++a.other;
      EXPECT_TRUE(loupe_unwind_row_cfa(r) == LOUPE_UNWIND_CFA_PLT ||
                  loupe_unwind_row_cfa(r) == LOUPE_UNWIND_CFA_UNSUPPORTED)
          << at;
    }
  }
  if (cfi) dwarf_cfi_end(cfi);
  elf_end(elf);
  ::close(fd);
  return a;
}

void check_file(const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not installed";
  FileRows t;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(loupe::build_file_rows(path, &t)) << path;
  const auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GT(t.rows.size(), 100u) << path;
  for (std::size_t i = 1; i < t.rows.size(); ++i) ASSERT_LT(t.rows[i - 1].pc, t.rows[i].pc);
  const auto& s = t.stats;
  // Nearly every row is one the kernel follows by rule; the rest are few and counted.
  EXPECT_LT(s.unsupported * 100, s.cfi_rows) << path;
  Agreement a = check_against_libdw(path, t, 20000);
  EXPECT_GT(a.simple * 10, a.sampled * 8) << path;  // the common case is the common case
  std::printf(
      "%s: %zu rows, %zu bytes (%u per row); %llu FDEs, %llu CFI rows, %llu PLT, "
      "%llu signal, %llu unsupported; built in %.1f ms; %zu pcs checked (%zu gaps, "
      "%zu neither rsp/rbp-based)\n",
      path.c_str(), t.rows.size(), t.bytes(), static_cast<unsigned>(sizeof(loupe_unwind_row)),
      static_cast<unsigned long long>(s.fdes), static_cast<unsigned long long>(s.cfi_rows),
      static_cast<unsigned long long>(s.plt), static_cast<unsigned long long>(s.signal),
      static_cast<unsigned long long>(s.unsupported), ms, a.sampled, a.gaps, a.other);
}

TEST(FileRows, XzRowsAgreeWithLibdw) {
  check_file("/usr/bin/xz");
}
TEST(FileRows, LsRowsAgreeWithLibdw) {
  check_file("/bin/ls");
}
TEST(FileRows, LibcRowsAgreeWithLibdw) {
  check_file("/lib/x86_64-linux-gnu/libc.so.6");
}
TEST(FileRows, Python3RowsAgreeWithLibdw) {
  check_file("/usr/bin/python3.11");
}

TEST(FileRows, PltStubsGetThePltRule) {
  FileRows t;
  ASSERT_TRUE(loupe::build_file_rows("/lib/x86_64-linux-gnu/libc.so.6", &t))
      << "/lib/x86_64-linux-gnu/libc.so.6";
  EXPECT_GT(t.stats.plt, 0u);
  bool found = false;
  for (const auto& r : t.rows)
    if (loupe_unwind_row_cfa(&r) == LOUPE_UNWIND_CFA_PLT) {
      found = true;
      EXPECT_GE(loupe_unwind_row_cfa_off(&r),
                10);  // the stub's push sits at byte 10 or 11 of its 16
      EXPECT_LE(loupe_unwind_row_cfa_off(&r), 11);
    }
  EXPECT_TRUE(found);
}

TEST(FileRows, VforkKeepsItsReturnAddressInRdi) {
  // glibc's vfork pops its return address into rdi before the syscall (the child shares
  // the stack and would clobber it): after the pop, CFA = rsp + 0 and the return address
  // is rdi, which a blocked vfork parent's saved registers hold.
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  FileRows t;
  ASSERT_TRUE(loupe::build_file_rows(libc, &t)) << libc;
  Elf* elf = nullptr;
  int fd = ::open(libc.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  elf_version(EV_CURRENT);
  elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  std::uint64_t vfork = 0;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr && !vfork;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (std::size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) &&
          std::string(elf_strptr(elf, sh.sh_link, sym.st_name)) == "vfork")
        vfork = sym.st_value;
    }
  }
  elf_end(elf);
  ::close(fd);
  ASSERT_NE(vfork, 0u) << "no vfork in " << libc;
  const loupe_unwind_row* entry = t.find(vfork);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(loupe_unwind_row_cfa(entry), LOUPE_UNWIND_CFA_RSP);  // before the pop: as any function
  bool rdi = false;
  for (std::uint64_t pc = vfork + 1; pc < vfork + 32 && !rdi; ++pc) {
    const loupe_unwind_row* r = t.find(pc);
    rdi = r && loupe_unwind_row_cfa(r) == LOUPE_UNWIND_CFA_RSP_RA_RDI;
    if (rdi) EXPECT_EQ(loupe_unwind_row_cfa_off(r), 0) << "right after the pop";
  }
  EXPECT_TRUE(rdi) << "no row of vfork keeps its return address in rdi";
}

TEST(FileRows, AFileWithoutEhFrameIsAnError) {
  FileRows t;
  const loupe::Status text = loupe::build_file_rows("/etc/passwd", &t);
  EXPECT_FALSE(text);
  EXPECT_NE(text.error().find("/etc/passwd: not an ELF file"), std::string::npos) << text.error();
  EXPECT_FALSE(loupe::build_file_rows("/nonexistent", &t));
}

// The kernel's row lookup (loupe_unwind_row_index): the rows between the page index's
// entry for the address's page and the next, binary-searched. nullptr: no row.
const loupe_unwind_row* page_lookup(const std::vector<loupe_unwind_row>& rows,
                                    std::uint32_t row_first, std::uint32_t row_count,
                                    std::uint32_t page_first, std::uint32_t page_count,
                                    std::uint32_t page_base, std::uint64_t link) {
  if (link < page_base || row_count == 0) return nullptr;
  const std::uint64_t page =
      std::min<std::uint64_t>((link - page_base) >> LOUPE_UNWIND_PAGE_SHIFT, page_count);
  std::uint32_t lo = row_first + rows[page_first + page].pc;
  const std::uint32_t hi =
      page < page_count ? row_first + rows[page_first + page + 1].pc + 1 : row_first + row_count;
  for (std::uint32_t h = hi; lo < h;) {
    const std::uint32_t mid = lo + (h - lo) / 2;
    if (rows[mid].pc <= link)
      lo = mid + 1;
    else
      h = mid;
  }
  if (lo == row_first) return nullptr;
  return &rows[lo - 1];
}

void check_page_index(const std::string& file) {
  FileRows t;
  ASSERT_TRUE(loupe::build_file_rows(file, &t)) << file;
  std::uint32_t base = 0;
  const auto index = loupe::unwind_page_index(t.rows, &base);
  ASSERT_FALSE(index.empty());
  std::vector<loupe_unwind_row> all = t.rows;
  all.insert(all.end(), index.begin(), index.end());
  const auto n = static_cast<std::uint32_t>(t.rows.size());
  const auto pages = static_cast<std::uint32_t>(index.size() - 1);
  std::size_t widest = 0, checked = 0;
  for (std::uint32_t k = 0; k < pages; ++k)
    widest = std::max<std::size_t>(widest, index[k + 1].pc - index[k].pc + 1);
  // Every row's edges and every page's, and beyond both ends.
  std::vector<std::uint64_t> pcs = {0, base, std::uint64_t{t.rows.back().pc} + 4096};
  for (const auto& r : t.rows)
    for (std::uint64_t d : {0, 1, 2}) pcs.push_back(r.pc + d - 1);
  for (std::uint32_t k = 0; k <= pages; ++k)
    for (std::uint64_t d : {0, 1, 2})
      pcs.push_back(base + (std::uint64_t{k} << LOUPE_UNWIND_PAGE_SHIFT) + d - 1);
  for (std::uint64_t pc : pcs) {
    const loupe_unwind_row* want = t.find(pc);
    const loupe_unwind_row* got = page_lookup(all, 0, n, n, pages, base, pc);
    ASSERT_EQ(want ? want->pc : ~0u, got ? got->pc : ~0u) << std::hex << "pc 0x" << pc;
    ++checked;
  }
  std::printf(
      "  %s: %u rows, %u pages of %u bytes, at most %zu rows searched a page; %zu "
      "addresses checked\n",
      file.c_str(), n, pages, LOUPE_UNWIND_PAGE_SIZE, widest, checked);
}

TEST(FileRows, ThePageIndexFindsTheRowInForceAtEveryAddress) {
  for (const std::string file : {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/python3.11"}) {
    if (::access(file.c_str(), R_OK) == 0) check_page_index(file);
  }
}

// The kernel's walk (unwind.bpf.h) in user space, over a copied stack: the model the BPF
// code follows, checked here against libdwfl frame by frame.
std::vector<std::uint64_t> table_walk(const loupe::RowStore& store, const loupe_unwind_proc& proc,
                                      const unwind_capture& c) {
  std::vector<std::uint64_t> out;
  std::uint64_t pc = c.regs[16], sp = c.regs[7], bp = c.regs[6];
  auto read = [&](std::uint64_t addr, std::uint64_t* v) {
    if (addr < c.regs[7] || addr + 8 > c.regs[7] + c.len) return false;
    std::memcpy(v, c.stack + (addr - c.regs[7]), 8);
    return true;
  };
  for (int depth = 0; depth < LOUPE_UNWIND_MAX_DEPTH && pc; ++depth) {
    out.push_back(pc);
    const loupe_unwind_mapping* m = nullptr;
    for (std::uint32_t i = 0; i < proc.count; ++i)
      if (pc >= proc.maps[i].start && pc < proc.maps[i].end) m = &proc.maps[i];
    if (!m) break;
    const std::uint64_t link = pc - m->bias - (depth > 0 ? 1 : 0);
    const loupe_unwind_row* row = page_lookup(store.rows(), m->row_first, m->row_count,
                                              m->page_first, m->page_count, m->page_base, link);
    if (!row) break;
    std::uint64_t cfa = 0;
    if (loupe_unwind_row_cfa(row) == LOUPE_UNWIND_CFA_RSP)
      cfa = sp + static_cast<std::uint64_t>(std::int64_t{loupe_unwind_row_cfa_off(row)});
    else if (loupe_unwind_row_cfa(row) == LOUPE_UNWIND_CFA_RBP)
      cfa = bp + static_cast<std::uint64_t>(std::int64_t{loupe_unwind_row_cfa_off(row)});
    else if (loupe_unwind_row_cfa(row) == LOUPE_UNWIND_CFA_PLT)
      cfa = sp + 8 +
            (((pc & 15) >= static_cast<std::uint64_t>(loupe_unwind_row_cfa_off(row))) ? 8 : 0);
    else
      break;
    std::uint64_t ra = 0;
    if (!read(cfa - 8, &ra)) break;
    if (loupe_unwind_row_rbp(row) == LOUPE_UNWIND_RBP_AT_CFA &&
        !read(cfa + static_cast<std::uint64_t>(std::int64_t{loupe_unwind_row_rbp_off(row)}), &bp))
      break;
    sp = cfa;
    pc = ra;
  }
  return out;
}

TEST(FileRows, TheKernelsWalkMatchesLibdwflOnAStackWithoutFramePointers) {
  auto capture = std::make_unique<unwind_capture>();
  ASSERT_NE(unwind_chain_level3(capture.get(), 5), -1);
  loupe::RowStore store;
  loupe_unwind_proc proc{};
  const loupe::Status loaded = store.load_process(static_cast<std::uint32_t>(getpid()), &proc);
  ASSERT_TRUE(loaded) << loaded.error();
  ASSERT_GT(proc.count, 1u);  // this test's executable and libc at least

  auto ours = table_walk(store, proc, *capture);
  auto sym = loupe::make_symbolizer();
  std::vector<std::uint64_t> theirs(LOUPE_UNWIND_MAX_DEPTH);
  loupe_user_regs regs{};
  regs.size = sizeof(regs);
  regs.arch = LOUPE_ARCH_X86_64;
  regs.mask = (1ull << 17) - 1;
  for (int i = 0; i < 17; ++i) regs.regs[i] = capture->regs[i];
  auto res = sym->unwind_user(static_cast<std::uint32_t>(getpid()), regs, capture->stack,
                              capture->len, theirs.data(), LOUPE_UNWIND_MAX_DEPTH);
  theirs.resize(res.n);
  ASSERT_GE(theirs.size(), 5u);
  // The same frames down to main and below (libc's start code), address for address.
  EXPECT_EQ(ours, theirs);
  std::vector<loupe_frame> frames(ours.size());
  sym->symbolize(static_cast<std::uint32_t>(getpid()), LOUPE_FRAME_USER, ours.data(),
                 static_cast<std::uint32_t>(ours.size()), frames.data());
  std::vector<std::string> names;
  for (const auto& f : frames) names.emplace_back(f.symbol ? f.symbol : "?");
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "unwind_chain_capture");
  EXPECT_EQ(names[1], "unwind_chain_level1");
  EXPECT_EQ(names[2], "unwind_chain_level2");
  EXPECT_EQ(names[3], "unwind_chain_level3");
  EXPECT_NE(std::find(names.begin(), names.end(), "main"), names.end());
}

}  // namespace

// With a builder, a file not built yet never blocks the caller: the process's entry leaves
// its mappings out (deferred) and each file is handed over once, whoever asks; the
// results, added back, give the same entry as building at once, rows and all.
TEST(FileRows, AFileHandedToTheBuilderIsLeftOutUntilItsResultIsBack) {
  const auto self = static_cast<std::uint32_t>(getpid());
  loupe::RowStore at_once;
  loupe_unwind_proc want{};
  ASSERT_TRUE(at_once.load_process(self, &want));
  ASSERT_GT(want.count, 1u);

  loupe::RowStore store;
  std::vector<loupe::RowStore::BuildJob> jobs;
  std::map<loupe::RowStore::FileKey, std::uint64_t> asked;  // key -> highest priority
  store.set_builder([&](const loupe::RowStore::BuildJob& job, std::uint64_t priority) {
    auto [it, first] = asked.try_emplace(job.key, priority);
    if (first)
      jobs.push_back(job);
    else
      it->second = std::max(it->second, priority);
  });
  loupe_unwind_proc proc{};
  store.set_priority(3);
  ASSERT_TRUE(store.load_process(self, &proc));
  EXPECT_TRUE(store.deferred());
  EXPECT_EQ(proc.count, 0u) << "no file built yet, so no mapping";
  EXPECT_EQ(store.pending(), jobs.size());
  ASSERT_GE(jobs.size(), 2u);
  // Asked again by a busier process: handed over again with its priority, not queued twice.
  store.set_priority(9);
  ASSERT_TRUE(store.load_process(self, &proc));
  for (const auto& job : jobs) EXPECT_EQ(asked[job.key], 9u) << job.path;
  EXPECT_EQ(store.pending(), jobs.size());

  // A command's prebuild does not wait for the builder: its files are built at once,
  // and the process's entry has them before their handed-over results are back.
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_GE(store.prebuild(exe), 2u) << "this test and its libraries";
  ASSERT_TRUE(store.load_process(self, &proc));
  EXPECT_GE(proc.count, 2u) << "prebuilt files are in the entry at once";

  for (auto& job : jobs) store.add_built(loupe::RowStore::build(job));
  EXPECT_EQ(store.pending(), 0u);
  ASSERT_TRUE(store.load_process(self, &proc));
  EXPECT_FALSE(store.deferred());
  ASSERT_EQ(proc.count, want.count);
  EXPECT_EQ(store.rows().size(), at_once.rows().size());
  for (std::uint32_t i = 0; i < proc.count; ++i) {
    EXPECT_EQ(proc.maps[i].start, want.maps[i].start);
    EXPECT_EQ(proc.maps[i].bias, want.maps[i].bias);
    EXPECT_EQ(proc.maps[i].row_count, want.maps[i].row_count);
  }
}

namespace {

// A row is 8 bytes (ABI 1.11): the rule's four parts come back as packed, at the ends of
// their ranges too, and a rule that does not fit is refused (built as unsupported), never
// cut to another offset.
TEST(UnwindRow, ItsRuleComesBackAsPackedAndWhatDoesNotFitIsRefused) {
  static_assert(sizeof(loupe_unwind_row) == 8, "an array map pads to 8: no more, no less");
  static_assert(sizeof(loupe_unwind_row_v1) == 12, "ABI 1.5-1.10's row, for their plugins");
  struct Case {
    std::uint32_t cfa, rbp;
    std::int32_t rbp_off, cfa_off;
  };
  const Case fits[] = {
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_SAME, 0, 8},
      {LOUPE_UNWIND_CFA_RBP, LOUPE_UNWIND_RBP_AT_CFA, -16, 16},
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_AT_CFA, LOUPE_UNWIND_RBP_OFF_MIN,
       LOUPE_UNWIND_CFA_OFF_MAX},
      {LOUPE_UNWIND_CFA_RSP_RA_RDI, LOUPE_UNWIND_RBP_UNDEFINED, LOUPE_UNWIND_RBP_OFF_MAX,
       LOUPE_UNWIND_CFA_OFF_MIN},
      {LOUPE_UNWIND_CFA_PLT, LOUPE_UNWIND_RBP_SAME, 0, 11},
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_AT_CFA, -56, 33 * 1024 + 8},  // libc's largest
  };
  for (const Case& c : fits) {
    loupe_unwind_row r{0x1234, 0};
    ASSERT_EQ(loupe_unwind_rule(c.cfa, c.rbp, c.rbp_off, c.cfa_off, &r.rule), 1) << c.cfa_off;
    EXPECT_EQ(loupe_unwind_row_cfa(&r), c.cfa);
    EXPECT_EQ(loupe_unwind_row_rbp(&r), c.rbp);
    EXPECT_EQ(loupe_unwind_row_rbp_off(&r), c.rbp_off);
    EXPECT_EQ(loupe_unwind_row_cfa_off(&r), c.cfa_off);
  }
  const Case refused[] = {
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_SAME, 0, LOUPE_UNWIND_CFA_OFF_MAX + 1},
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_SAME, 0, LOUPE_UNWIND_CFA_OFF_MIN - 1},
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_AT_CFA, -12, 16},  // not a multiple of 8
      {LOUPE_UNWIND_CFA_RSP, LOUPE_UNWIND_RBP_AT_CFA, LOUPE_UNWIND_RBP_OFF_MIN - 8, 16},
  };
  for (const Case& c : refused) {
    std::uint32_t rule = 0xdead;
    EXPECT_EQ(loupe_unwind_rule(c.cfa, c.rbp, c.rbp_off, c.cfa_off, &rule), 0) << c.cfa_off;
    EXPECT_EQ(rule, 0xdeadu);
  }
  // Rule 0 is a gap (CFA_NONE): the page index's entries and the row after an FDE.
  const loupe_unwind_row gap{};
  EXPECT_EQ(loupe_unwind_row_cfa(&gap), static_cast<std::uint32_t>(LOUPE_UNWIND_CFA_NONE));
}

}  // namespace
