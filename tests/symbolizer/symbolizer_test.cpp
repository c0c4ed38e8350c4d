// SPDX-License-Identifier: Apache-2.0
//
// The symbolizer against real processes: programs built by the test build with known
// symbols print their runtime addresses, the test resolves them through the public
// interface and checks names, offsets, modules and how each frame was resolved.
#include "loupe/symbolizer.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "live_target.hpp"

namespace loupe {
namespace {

using test::LiveTarget;
namespace fs = std::filesystem;

std::string str(const char* s) {
  return s ? s : "(null)";
}

loupe_frame user_frame(Symbolizer& sym, std::uint32_t pid, std::uint64_t addr) {
  loupe_frame f{};
  sym.symbolize(pid, LOUPE_FRAME_USER, &addr, 1, &f);
  return f;
}

loupe_frame data_frame(Symbolizer& sym, std::uint32_t pid, std::uint64_t addr) {
  loupe_frame f{};
  sym.symbolize_data(pid, addr, &f);
  return f;
}

bool ends_with(const char* s, const std::string& suffix) {
  return s && std::string(s).ends_with(suffix);
}

// st_value of `name` in the .symtab of `path`, read independently of the symbolizer.
std::uint64_t link_address(const std::string& path, const std::string& name) {
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  std::uint64_t value = 0;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && !value; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_SYMTAB) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (std::size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; ++i) {
      GElf_Sym s;
      gelf_getsym(data, static_cast<int>(i), &s);
      const char* n = elf_strptr(elf, shdr.sh_link, s.st_name);
      if (n && name == n) value = s.st_value;
    }
  }
  elf_end(elf);
  ::close(fd);
  return value;
}

void expect_function(Symbolizer& sym, const LiveTarget& t, const std::string& name,
                     loupe_frame_resolution how, const std::string& module_suffix) {
  std::uint64_t a = t.addr(name);
  loupe_frame f = user_frame(sym, t.pid(), a);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(how)) << name;
  EXPECT_EQ(str(f.symbol), name);
  EXPECT_EQ(f.offset, 0u) << name;
  EXPECT_EQ(f.address, a);
  EXPECT_EQ(f.kind, static_cast<std::uint32_t>(LOUPE_FRAME_USER));
  EXPECT_TRUE(ends_with(f.module, module_suffix)) << str(f.module);
  // Inside the function, as a return address would be.
  f = user_frame(sym, t.pid(), a + 3);
  EXPECT_EQ(str(f.symbol), name);
  EXPECT_EQ(f.offset, 3u);
}

TEST(Symbolizer, PieExecutableFromSymtab) {
  LiveTarget t(LOUPE_TARGET_PIE);
  auto sym = make_symbolizer();
  expect_function(*sym, t, "loupe_known_function", LOUPE_RESOLVED_SYMTAB, "symbolizer_target_pie");
  expect_function(*sym, t, "loupe_static_function", LOUPE_RESOLVED_SYMTAB, "symbolizer_target_pie");
}

TEST(Symbolizer, NonPieExecutableFromSymtab) {
  LiveTarget t(LOUPE_TARGET_NOPIE);
  // Non-PIE: runtime addresses are the link-time ones.
  EXPECT_EQ(t.addr("loupe_known_function"),
            link_address(LOUPE_TARGET_NOPIE, "loupe_known_function"));
  auto sym = make_symbolizer();
  expect_function(*sym, t, "loupe_known_function", LOUPE_RESOLVED_SYMTAB,
                  "symbolizer_target_nopie");
  expect_function(*sym, t, "loupe_static_function", LOUPE_RESOLVED_SYMTAB,
                  "symbolizer_target_nopie");
  loupe_frame g = data_frame(*sym, t.pid(), t.addr("loupe_known_global"));
  EXPECT_EQ(str(g.symbol), "loupe_known_global");
}

TEST(Symbolizer, StrippedExecutableFallsBackToDynsym) {
  LiveTarget t(LOUPE_TARGET_STRIPPED);
  auto sym = make_symbolizer();
  // Exported by -rdynamic: still named from .dynsym.
  expect_function(*sym, t, "loupe_known_function", LOUPE_RESOLVED_DYNSYM,
                  "symbolizer_target_stripped");
  // A static function lives only in .symtab, which strip removed: it is named by the
  // .eh_frame FDE that covers it, module file name and link-time start (the address of
  // the unstripped twin, so addr2line on that twin finds it), and every address inside
  // groups under that one name.
  std::uint64_t expected = link_address(LOUPE_TARGET_RDYNAMIC, "loupe_static_function");
  ASSERT_NE(expected, 0u);
  char name[128];
  std::snprintf(name, sizeof(name), "symbolizer_target_stripped [fn@0x%llx]",
                static_cast<unsigned long long>(expected));
  for (std::uint64_t off : {0ull, 1ull, 3ull}) {
    loupe_frame f = user_frame(*sym, t.pid(), t.addr("loupe_static_function") + off);
    EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_EH_FRAME));
    EXPECT_EQ(str(f.symbol), name);
    EXPECT_EQ(f.offset, off);
    EXPECT_TRUE(ends_with(f.module, "symbolizer_target_stripped")) << str(f.module);
  }
  loupe_frame g = data_frame(*sym, t.pid(), t.addr("loupe_known_global"));
  EXPECT_EQ(g.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_DYNSYM));
  EXPECT_EQ(str(g.symbol), "loupe_known_global");
}

TEST(Symbolizer, SharedLibraryFunctionAndVariable) {
  LiveTarget t(LOUPE_TARGET_SHLIB);
  auto sym = make_symbolizer();
  expect_function(*sym, t, "loupe_lib_function", LOUPE_RESOLVED_SYMTAB, "libloupe_known.so");
  expect_function(*sym, t, "loupe_known_function", LOUPE_RESOLVED_SYMTAB,
                  "symbolizer_target_shlib");
  loupe_frame g = data_frame(*sym, t.pid(), t.addr("loupe_lib_global"));
  EXPECT_EQ(g.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
  EXPECT_EQ(str(g.symbol), "loupe_lib_global");
  EXPECT_TRUE(ends_with(g.module, "libloupe_known.so")) << str(g.module);
}

TEST(Symbolizer, DataAddressesNameGlobals) {
  LiveTarget t(LOUPE_TARGET_PIE);
  auto sym = make_symbolizer();
  loupe_frame g = data_frame(*sym, t.pid(), t.addr("loupe_known_global"));
  EXPECT_EQ(g.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
  EXPECT_EQ(str(g.symbol), "loupe_known_global");
  EXPECT_EQ(g.offset, 0u);
  // .bss mostly beyond the file's pages: the kernel maps it as anonymous memory.
  std::uint64_t bss = t.addr("loupe_known_bss");
  for (std::uint64_t off : {8ull, 2048ull, 4088ull}) {
    loupe_frame b = data_frame(*sym, t.pid(), bss + off);
    EXPECT_EQ(str(b.symbol), "loupe_known_bss") << off;
    EXPECT_EQ(b.offset, off);
  }
  // A function is not a data symbol.
  loupe_frame f = data_frame(*sym, t.pid(), t.addr("loupe_known_function"));
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));
}

TEST(Symbolizer, BatchKeepsOrderAndMixesOutcomes) {
  LiveTarget t(LOUPE_TARGET_PIE);
  auto sym = make_symbolizer();
  std::vector<std::uint64_t> addrs = {t.addr("loupe_known_function") + 1, 0x10,
                                      t.addr("loupe_static_function") + 2,
                                      t.addr("jit_region") + 64};
  std::vector<loupe_frame> out(addrs.size());
  sym->symbolize(t.pid(), LOUPE_FRAME_USER, addrs.data(), static_cast<std::uint32_t>(addrs.size()),
                 out.data());
  EXPECT_EQ(str(out[0].symbol), "loupe_known_function");
  EXPECT_EQ(out[1].resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_MODULE));
  EXPECT_EQ(out[1].module, nullptr);
  EXPECT_EQ(out[1].offset, 0x10u);
  EXPECT_EQ(str(out[2].symbol), "loupe_static_function");
  // Anonymous memory without a perf map: module known, no symbol.
  EXPECT_EQ(out[3].resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));
  EXPECT_EQ(str(out[3].module), "[anon]");
  EXPECT_EQ(out[3].offset, 64u);
}

std::uint64_t kallsyms_address(const std::string& name, std::string* module) {
  std::ifstream in("/proc/kallsyms");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, type, sym, mod;
    ls >> addr >> type >> sym >> mod;
    if (sym == name && (type == "T" || type == "t")) {
      *module = mod;
      return std::stoull(addr, nullptr, 16);
    }
  }
  return 0;
}

TEST(Symbolizer, KernelAddressesFromKallsyms) {
  std::string module;
  std::uint64_t a = kallsyms_address("do_nanosleep", &module);
  if (a == 0) a = kallsyms_address("schedule", &module);
  if (a == 0) GTEST_SKIP() << "kallsyms shows no addresses (kptr_restrict; needs root)";
  auto sym = make_symbolizer();
  std::uint64_t addrs[2] = {a + 4, 0x1000};
  loupe_frame out[2];
  sym->symbolize(0, LOUPE_FRAME_KERNEL, addrs, 2, out);
  EXPECT_EQ(out[0].resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_KALLSYMS));
  EXPECT_TRUE(str(out[0].symbol) == "do_nanosleep" || str(out[0].symbol) == "schedule")
      << str(out[0].symbol);
  EXPECT_EQ(out[0].offset, 4u);
  EXPECT_EQ(str(out[0].module), "[kernel]");
  EXPECT_EQ(out[0].kind, static_cast<std::uint32_t>(LOUPE_FRAME_KERNEL));
  // A user-space address is no kernel symbol.
  EXPECT_EQ(out[1].resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_MODULE));
  EXPECT_GT(sym->stats().kernel_symbols, 10000u);
}

TEST(Symbolizer, KernelModuleOrBpfSymbolsCarryTheirModule) {
  std::ifstream in("/proc/kallsyms");
  std::string line, addr, type, name, module;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    module.clear();
    ls >> addr >> type >> name >> module;
    if (!module.empty() && (type == "t" || type == "T") && std::stoull(addr, nullptr, 16) != 0)
      break;
    module.clear();
  }
  if (module.empty()) GTEST_SKIP() << "no module or BPF text symbol in /proc/kallsyms";
  auto sym = make_symbolizer();
  std::uint64_t a = std::stoull(addr, nullptr, 16);
  loupe_frame f{};
  sym->symbolize(0, LOUPE_FRAME_KERNEL, &a, 1, &f);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_KALLSYMS));
  EXPECT_EQ(str(f.module), module);
}

TEST(Symbolizer, KernelDataAddresses) {
  // Without CONFIG_KALLSYMS_ALL only a few data symbols are listed: take the first one.
  std::ifstream in("/proc/kallsyms");
  std::string line, addr, type, name;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    ls >> addr >> type >> name;
    if ((type == "D" || type == "d" || type == "B" || type == "b") &&
        std::stoull(addr, nullptr, 16) != 0)
      break;
    name.clear();
  }
  if (name.empty()) GTEST_SKIP() << "no readable kernel data symbol in /proc/kallsyms";
  auto sym = make_symbolizer();
  loupe_frame f = data_frame(*sym, 0, std::stoull(addr, nullptr, 16));
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_KALLSYMS));
  EXPECT_EQ(f.offset, 0u);
  EXPECT_FALSE(str(f.symbol).empty());
  // Text is not data.
  std::string module;
  std::uint64_t text = kallsyms_address("schedule", &module);
  if (text != 0) {
    EXPECT_NE(str(data_frame(*sym, 0, text).symbol), "schedule");
  }
}

// The line of known_target.c tagged with "// line: <tag>".
std::uint32_t source_line(const std::string& tag) {
  std::ifstream in(LOUPE_KNOWN_TARGET_SOURCE);
  std::string line;
  for (std::uint32_t n = 1; std::getline(in, line); ++n)
    if (line.ends_with("// line: " + tag)) return n;
  return 0;
}

TEST(Symbolizer, SourceLinesFromDwarf) {
  LiveTarget t(LOUPE_TARGET_PIE);
  auto sym = make_symbolizer();
  SourceLocation loc[4];
  std::uint32_t n = sym->source_lines(t.pid(), t.addr("loupe_known_function"), loc, 4);
  if (n == 0) GTEST_SKIP() << "built without libdw";
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(str(loc[0].function), "loupe_known_function");
  EXPECT_TRUE(ends_with(loc[0].file, "known_target.c")) << str(loc[0].file);
  // The entry's row is the first statement's line once the prologue is optimized away.
  EXPECT_GE(loc[0].line, source_line("known_function"));
  EXPECT_LE(loc[0].line, source_line("known_function") + 2);
  EXPECT_FALSE(loc[0].inlined);
}

TEST(Symbolizer, SourceLinesUnwindInlinedCalls) {
  LiveTarget t(LOUPE_TARGET_PIE);
  auto sym = make_symbolizer();
  std::uint64_t caller = t.addr("loupe_inline_caller");
  // Somewhere in the caller's code is the inlined helper's body: find it.
  bool found = false;
  for (std::uint64_t a = caller; a < caller + 64 && !found; ++a) {
    if (str(user_frame(*sym, t.pid(), a).symbol) != "loupe_inline_caller") break;
    SourceLocation loc[4];
    std::uint32_t n = sym->source_lines(t.pid(), a, loc, 4);
    if (n == 0 && a == caller) GTEST_SKIP() << "built without libdw";
    if (n != 2 || !loc[0].inlined) continue;
    found = true;
    EXPECT_EQ(str(loc[0].function), "loupe_inlined_helper");
    EXPECT_TRUE(ends_with(loc[0].file, "known_target.c")) << str(loc[0].file);
    EXPECT_GE(loc[0].line, source_line("inlined_body") - 2);
    EXPECT_LE(loc[0].line, source_line("inlined_body") + 1);
    EXPECT_EQ(str(loc[1].function), "loupe_inline_caller");
    EXPECT_FALSE(loc[1].inlined);
    EXPECT_TRUE(ends_with(loc[1].file, "known_target.c")) << str(loc[1].file);
    EXPECT_EQ(loc[1].line, source_line("call_site"));
  }
  EXPECT_TRUE(found) << "no address of loupe_inline_caller maps to the inlined helper";
}

TEST(Symbolizer, NoSourceLinesWithoutDebugInfo) {
  LiveTarget t(LOUPE_TARGET_STRIPPED);
  auto sym = make_symbolizer();
  SourceLocation loc[4];
  EXPECT_EQ(sym->source_lines(t.pid(), t.addr("loupe_known_function"), loc, 4), 0u);
  // Still symbolized from .dynsym.
  EXPECT_EQ(str(user_frame(*sym, t.pid(), t.addr("loupe_known_function")).symbol),
            "loupe_known_function");
}

class PerfMapFile {
 public:
  explicit PerfMapFile(std::uint32_t pid) : path_("/tmp/perf-" + std::to_string(pid) + ".map") {}
  ~PerfMapFile() { std::remove(path_.c_str()); }
  void write(const std::string& text) {
    std::ofstream out(path_, std::ios::trunc);
    out << text;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Symbolizer, JitFramesFromPerfMapRereadWhenItChanges) {
  LiveTarget t(LOUPE_TARGET_PIE);
  std::uint64_t jit = t.addr("jit_region");
  PerfMapFile map(t.pid());
  char line[256];
  std::snprintf(line, sizeof(line), "%llx 80 LoupeFakeJit::compiled_fn\n",
                static_cast<unsigned long long>(jit + 0x100));
  map.write(line);
  auto sym = make_symbolizer();
  loupe_frame f = user_frame(*sym, t.pid(), jit + 0x110);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_PERF_MAP));
  EXPECT_EQ(f.kind, static_cast<std::uint32_t>(LOUPE_FRAME_JIT));
  EXPECT_EQ(str(f.symbol), "LoupeFakeJit::compiled_fn");
  EXPECT_EQ(f.offset, 0x10u);
  EXPECT_EQ(str(f.module), map.path());
  // Outside every entry: still anonymous memory without a name.
  f = user_frame(*sym, t.pid(), jit + 0x400);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));
  // The JIT appends code: the new entry is found without invalidation.
  std::snprintf(line + std::strlen(line), sizeof(line) - std::strlen(line),
                "0x%llx 0x40 LoupeFakeJit::recompiled_fn\n",
                static_cast<unsigned long long>(jit + 0x400));
  map.write(line);
  f = user_frame(*sym, t.pid(), jit + 0x408);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_PERF_MAP));
  EXPECT_EQ(str(f.symbol), "LoupeFakeJit::recompiled_fn");
  EXPECT_EQ(f.offset, 8u);
}

TEST(Symbolizer, GoneProcessSaysSo) {
  auto t = std::make_unique<LiveTarget>(LOUPE_TARGET_PIE);
  std::uint32_t pid = t->pid();
  std::uint64_t a = t->addr("loupe_known_function");
  auto warm = make_symbolizer();
  EXPECT_EQ(str(user_frame(*warm, pid, a).symbol), "loupe_known_function");
  t->kill();
  // Never seen alive: nothing to resolve against.
  auto cold = make_symbolizer();
  loupe_frame f = user_frame(*cold, pid, a);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_PROCESS_GONE));
  EXPECT_EQ(f.symbol, nullptr);
  EXPECT_EQ(f.offset, a);
  // Seen alive: a final report after the process exited still gets its names...
  EXPECT_EQ(str(user_frame(*warm, pid, a).symbol), "loupe_known_function");
  // ...and still after a plugin said its maps changed (a warm pass that raced the exit):
  // a gone process cannot be read again, so what was learnt of it stays.
  warm->invalidate(pid);
  EXPECT_EQ(str(user_frame(*warm, pid, a).symbol), "loupe_known_function");
  // The session forgets it once its records are all symbolized.
  warm->forget(pid);
  EXPECT_EQ(user_frame(*warm, pid, a).resolution,
            static_cast<std::uint32_t>(LOUPE_UNRESOLVED_PROCESS_GONE));
}

// A full cache drops its least recently used process: a live one is read again when
// next asked for, an exited one is lost, and counted (session.symbol_processes).
TEST(Symbolizer, ExitedProcessesAFullCacheDropsAreCounted) {
  SymbolizerOptions o;
  o.max_cached_processes = 2;
  auto sym = make_symbolizer(o);
  std::vector<std::unique_ptr<LiveTarget>> t;
  for (int i = 0; i < 4; ++i) t.push_back(std::make_unique<LiveTarget>(LOUPE_TARGET_PIE));
  auto name = [&](int i) {
    return str(user_frame(*sym, t[static_cast<std::size_t>(i)]->pid(),
                          t[static_cast<std::size_t>(i)]->addr("loupe_known_function"))
                   .symbol);
  };
  EXPECT_EQ(name(0), "loupe_known_function");
  EXPECT_EQ(name(1), "loupe_known_function");
  t[0]->kill();
  EXPECT_EQ(name(2), "loupe_known_function");  // drops 0, exited
  EXPECT_EQ(sym->stats().evicted_exited, 1u);
  EXPECT_EQ(name(3), "loupe_known_function");  // drops 1, alive
  EXPECT_EQ(sym->stats().evicted_exited, 1u);
  EXPECT_EQ(name(1), "loupe_known_function");  // read again
}

TEST(Symbolizer, CodeFirstAskedForAfterExitStillResolves) {
  // A profiler symbolizes at its report, often after the command exited: the maps were read
  // while the process lived, but a library none of whose frames was asked for yet must
  // still resolve, though /proc/PID/root and map_files are gone by then.
  auto t = std::make_unique<LiveTarget>(LOUPE_TARGET_SHLIB);
  std::uint32_t pid = t->pid();
  std::uint64_t lib_fn = t->addr("loupe_lib_function");
  auto sym = make_symbolizer();
  EXPECT_EQ(str(user_frame(*sym, pid, t->addr("loupe_known_function")).symbol),
            "loupe_known_function");
  t->kill();
  loupe_frame f = user_frame(*sym, pid, lib_fn + 2);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
  EXPECT_EQ(str(f.symbol), "loupe_lib_function");
  EXPECT_EQ(f.offset, 2u);
  EXPECT_TRUE(ends_with(f.module, "libloupe_known.so")) << str(f.module);
}

// The GNU build-id of an ELF file as hex, "" when it has none.
std::string build_id_of(const std::string& path) {
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  std::string id;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && id.empty(); scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    GElf_Nhdr n;
    std::size_t off = 0, name_off = 0, desc_off = 0;
    while (data && (off = gelf_getnote(data, off, &n, &name_off, &desc_off)) > 0) {
      if (n.n_type != NT_GNU_BUILD_ID) continue;
      const auto* d = static_cast<const unsigned char*>(data->d_buf) + desc_off;
      char hex[3];
      for (std::size_t i = 0; i < n.n_descsz; ++i) {
        std::snprintf(hex, sizeof(hex), "%02x", d[i]);
        id += hex;
      }
      break;
    }
  }
  elf_end(elf);
  ::close(fd);
  return id;
}

TEST(Symbolizer, StaticGlibcFunctionFromTheDebugPackage) {
  // Debian's libc.so.6 has no .symtab: _int_malloc, a static function, is named only by the
  // separate debug file of libc6-dbg, found by build-id under /usr/lib/debug/.build-id.
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&::malloc), &info), 0);
  std::string libc = fs::canonical(info.dli_fname);
  std::string id = build_id_of(libc);
  ASSERT_GT(id.size(), 2u) << libc;
  std::string debug = "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
  if (!fs::exists(debug))
    GTEST_SKIP() << "libc6-dbg is not installed (no " << debug
                 << "); scripts/install-deps.sh installs it";
  std::uint64_t link = link_address(debug, "_int_malloc");
  ASSERT_NE(link, 0u) << "no _int_malloc in " << debug;
  // libc's first segment is linked at 0: runtime = load base + link-time address.
  std::uint64_t addr = reinterpret_cast<std::uint64_t>(info.dli_fbase) + link + 4;
  auto sym = make_symbolizer();
  loupe_frame f = user_frame(*sym, static_cast<std::uint32_t>(::getpid()), addr);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
  EXPECT_EQ(str(f.symbol), "_int_malloc");
  EXPECT_EQ(f.offset, 4u);
  EXPECT_TRUE(ends_with(f.module, "libc.so.6")) << str(f.module);
}

TEST(Symbolizer, BinaryThatExistsOnlyInAnotherMountNamespace) {
  // A container's files are not in loupe's mount namespace: the symbolizer opens them
  // through /proc/PID/root. The target is copied onto a tmpfs mounted only inside the
  // new namespace, over a directory that stays empty in ours.
  if (::geteuid() != 0) GTEST_SKIP() << "unshare -m needs root (CAP_SYS_ADMIN)";
  fs::path dir = fs::temp_directory_path() / ("loupe-mntns-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string inside = (dir / "inside_target").string();
  std::unique_ptr<LiveTarget> t;
  try {
    t = std::make_unique<LiveTarget>(
        std::vector<std::string>{"unshare", "-m", "sh", "-c",
                                 "mount -t tmpfs loupe-test " + dir.string() + " && cp " +
                                     LOUPE_TARGET_PIE + " " + inside + " && exec " + inside});
  } catch (const std::exception& e) {
    fs::remove_all(dir);
    GTEST_SKIP() << "cannot run a process in a new mount namespace here: " << e.what();
  }
  EXPECT_FALSE(fs::exists(inside)) << "the file must exist only inside the namespace";
  auto sym = make_symbolizer();
  loupe_frame f = user_frame(*sym, t->pid(), t->addr("loupe_static_function") + 1);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
  EXPECT_EQ(str(f.symbol), "loupe_static_function");
  EXPECT_EQ(f.offset, 1u);
  EXPECT_EQ(str(f.module), inside);
  t.reset();
  fs::remove_all(dir);
}

TEST(Symbolizer, DeletedAndReplacedExecutables) {
  if (::geteuid() != 0) GTEST_SKIP() << "reading /proc/PID/map_files needs root";
  fs::path dir = fs::temp_directory_path() / ("loupe-sym-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path deleted = dir / "deleted_target";
  fs::path replaced = dir / "replaced_target";
  fs::copy_file(LOUPE_TARGET_PIE, deleted, fs::copy_options::overwrite_existing);
  fs::copy_file(LOUPE_TARGET_PIE, replaced, fs::copy_options::overwrite_existing);
  LiveTarget d(deleted.string());
  LiveTarget r(replaced.string());
  fs::remove(deleted);
  // Replace with another program: the path now names a file with other symbols.
  fs::path tmp = dir / "tmp";
  fs::copy_file(LOUPE_TARGET_NOPIE, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, replaced);
  auto sym = make_symbolizer();
  for (const LiveTarget* t : {&d, &r}) {
    loupe_frame f = user_frame(*sym, t->pid(), t->addr("loupe_static_function") + 1);
    EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
    EXPECT_EQ(str(f.symbol), "loupe_static_function");
    EXPECT_EQ(f.offset, 1u);
  }
  fs::remove_all(dir);
}

TEST(Symbolizer, FileTablesAreSharedAcrossProcessesAndBounded) {
  LiveTarget a(LOUPE_TARGET_PIE);
  LiveTarget b(LOUPE_TARGET_PIE);
  SymbolizerOptions opts;
  opts.max_cached_processes = 1;
  auto sym = make_symbolizer(opts);
  EXPECT_EQ(str(user_frame(*sym, a.pid(), a.addr("loupe_known_function")).symbol),
            "loupe_known_function");
  std::uint64_t loads = sym->stats().elf_loads;
  EXPECT_GE(loads, 1u);
  // Same file in another process (another ASLR base): no new ELF parse.
  EXPECT_EQ(str(user_frame(*sym, b.pid(), b.addr("loupe_known_function")).symbol),
            "loupe_known_function");
  EXPECT_EQ(sym->stats().elf_loads, loads);
  EXPECT_EQ(sym->stats().cached_processes, 1u);
  // A hit reads nothing.
  std::uint64_t reads = sym->stats().maps_reads;
  for (int i = 0; i < 100; ++i) user_frame(*sym, b.pid(), b.addr("loupe_static_function"));
  EXPECT_EQ(sym->stats().maps_reads, reads);
  EXPECT_EQ(sym->stats().elf_loads, loads);
}

TEST(Symbolizer, StringsOutliveEvictionAndAreShared) {
  LiveTarget a(LOUPE_TARGET_PIE);
  LiveTarget b(LOUPE_TARGET_NOPIE);
  SymbolizerOptions opts;
  opts.max_cached_processes = 1;
  opts.max_cached_files = 1;
  auto sym = make_symbolizer(opts);
  loupe_frame fa = user_frame(*sym, a.pid(), a.addr("loupe_known_function"));
  loupe_frame fb = user_frame(*sym, b.pid(), b.addr("loupe_known_function"));   // evicts a
  loupe_frame fa2 = user_frame(*sym, a.pid(), a.addr("loupe_known_function"));  // reloads a
  EXPECT_EQ(str(fa.symbol), "loupe_known_function");
  EXPECT_EQ(fa.symbol, fb.symbol);  // interned once
  EXPECT_EQ(fa.symbol, fa2.symbol);
  EXPECT_EQ(sym->stats().cached_files, 1u);
}

TEST(Symbolizer, ConcurrentCallersSeeTheSameFrames) {
  LiveTarget t(LOUPE_TARGET_SHLIB);
  auto sym = make_symbolizer();
  std::vector<std::uint64_t> addrs = {t.addr("loupe_known_function"), t.addr("loupe_lib_function"),
                                      t.addr("loupe_static_function")};
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k) {
        loupe_frame out[3];
        sym->symbolize(t.pid(), LOUPE_FRAME_USER, addrs.data(), 3, out);
        if (str(out[0].symbol) != "loupe_known_function" ||
            str(out[1].symbol) != "loupe_lib_function" ||
            str(out[2].symbol) != "loupe_static_function")
          ++bad;
        if (k % 500 == 0) sym->invalidate(t.pid());
        if (k % 500 == 250) sym->forget(t.pid());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace loupe
