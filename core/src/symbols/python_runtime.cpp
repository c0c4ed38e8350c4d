// SPDX-License-Identifier: Apache-2.0
#include "symbols/python_runtime.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>

#include "symbols/eh_frame_ranges.hpp"
#include "util/unique_fd.hpp"

namespace loupe {
namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

// x86-64 release builds. Sources: the Python frames issue's research table (OpenTelemetry's
// python.go constants and type-object introspection, py-spy's generated bindings, Parca's
// runtime-data layouts); 3.11's checked against Debian's 3.11.2 (PyCode_Type's members,
// PyThreadState_GetFrame, _PyFrame_IsEntryFrame, PyGILState_GetThisThreadState).
constexpr PythonLayout kLayouts[] = {
    // major minor key   tstate cframe code prev instr entry  first file name qual line adapt ascii
    {3, 10, 588, 24, kNone, 32, 24, 96, 0, 40, 104, 112, 0, 120, 0, 48},
    {3, 11, 596, 56, 8, 32, 48, 56, 68, 72, 112, 120, 128, 136, 184, 48},
    {3, 12, 1548, 56, 0, 0, 8, 56, 70, 68, 112, 120, 128, 136, 192, 40},
};

class Elf {
 public:
  explicit Elf(int fd) {
    static std::once_flag once;
    std::call_once(once, [] { elf_version(EV_CURRENT); });
    elf_ = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  }
  ~Elf() {
    if (elf_) elf_end(elf_);
  }
  Elf(const Elf&) = delete;
  Elf& operator=(const Elf&) = delete;
  ::Elf* get() const { return elf_; }

 private:
  ::Elf* elf_ = nullptr;
};

struct Symbols {
  std::map<std::string, GElf_Sym> wanted;      // the names asked for, found
  std::vector<std::uint64_t> function_starts;  // every function symbol's address, sorted
};

Symbols read_symbols(::Elf* elf, const std::vector<std::string>& names) {
  Symbols out;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0) continue;
    const std::size_t n = sh.sh_size / sh.sh_entsize;
    for (std::size_t i = 0; i < n; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_value == 0) continue;
      if (GELF_ST_TYPE(sym.st_info) == STT_FUNC) out.function_starts.push_back(sym.st_value);
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name) continue;
      for (const auto& w : names)
        if (w == name) out.wanted.emplace(w, sym);
    }
  }
  std::sort(out.function_starts.begin(), out.function_starts.end());
  return out;
}

// The file offset of link-time address `vaddr`, from the PT_LOAD segments; -1 when none
// holds it in the file.
long long file_offset_of(::Elf* elf, std::uint64_t vaddr, std::uint64_t len) {
  std::size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return -1;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    if (vaddr >= ph.p_vaddr && vaddr + len <= ph.p_vaddr + ph.p_filesz)
      return static_cast<long long>(ph.p_offset + (vaddr - ph.p_vaddr));
  }
  return -1;
}

std::vector<FdeRange> fde_ranges(::Elf* elf) {
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return {};
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || std::strcmp(name, ".eh_frame") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || !data->d_buf) return {};
    return parse_eh_frame_ranges(static_cast<const std::uint8_t*>(data->d_buf), data->d_size,
                                 sh.sh_addr);
  }
  return {};
}

// The parts of a function the compiler moved out of it (GCC's ".cold" split): code its
// near jumps reach outside [start, end), in an FDE of its own that no function symbol
// starts. Scanning bytes for jump opcodes also meets operands that look like one; only a
// target inside such an unnamed FDE counts, which an operand's does not by chance.
std::vector<CodeRange> cold_parts(int fd, ::Elf* elf, std::uint64_t start, std::uint64_t end,
                                  const std::vector<std::uint64_t>& function_starts) {
  std::vector<CodeRange> out;
  const long long off = file_offset_of(elf, start, end - start);
  if (off < 0 || end - start > (8u << 20)) return out;
  std::vector<std::uint8_t> code(end - start);
  if (::pread(fd, code.data(), code.size(), off) != static_cast<ssize_t>(code.size())) return out;
  const std::vector<FdeRange> fdes = fde_ranges(elf);
  auto unnamed_fde = [&](std::uint64_t target) -> const FdeRange* {
    auto it = std::upper_bound(fdes.begin(), fdes.end(), target,
                               [](std::uint64_t a, const FdeRange& f) { return a < f.start; });
    if (it == fdes.begin() || target >= (--it)->end) return nullptr;
    auto named = std::lower_bound(function_starts.begin(), function_starts.end(), it->start);
    return named != function_starts.end() && *named < it->end ? nullptr : &*it;
  };
  for (std::size_t i = 0; i + 5 <= code.size(); ++i) {
    std::size_t len = 0;
    if (code[i] == 0xe9)
      len = 5;  // jmp rel32
    else if (code[i] == 0x0f && (code[i + 1] & 0xf0) == 0x80)
      len = 6;  // jcc rel32
    if (len == 0 || i + len > code.size()) continue;
    std::int32_t rel;
    std::memcpy(&rel, &code[i + len - 4], 4);
    const std::uint64_t target = start + i + len + static_cast<std::int64_t>(rel);
    if (target >= start && target < end) continue;
    const FdeRange* f = unnamed_fde(target);
    if (!f) continue;
    bool known = false;
    for (const auto& r : out) known |= r.start == f->start;
    if (!known) out.push_back({f->start, f->end});
  }
  return out;
}

}  // namespace

const PythonLayout* python_layout(std::uint32_t major, std::uint32_t minor) {
  for (const auto& l : kLayouts)
    if (l.major == major && l.minor == minor) return &l;
  return nullptr;
}

std::string PythonRuntime::version() const {
  return std::to_string(major()) + "." + std::to_string(minor()) + "." + std::to_string(micro());
}

Result<PythonRuntime> read_python_runtime(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return make_error(path + ": " + std::strerror(errno));
  Elf elf(fd.get());
  if (!elf.get() || elf_kind(elf.get()) != ELF_K_ELF) return make_error(path + ": not an ELF file");
  const Symbols syms =
      read_symbols(elf.get(), {"_PyRuntime", "Py_Version", "_PyEval_EvalFrameDefault"});
  auto find = [&](const char* n) {
    auto it = syms.wanted.find(n);
    return it == syms.wanted.end() ? nullptr : &it->second;
  };
  const GElf_Sym* runtime = find("_PyRuntime");
  const GElf_Sym* version = find("Py_Version");
  const GElf_Sym* eval = find("_PyEval_EvalFrameDefault");
  if (!runtime || !eval || eval->st_size == 0)
    return make_error(path + ": no CPython interpreter (_PyRuntime, _PyEval_EvalFrameDefault)");
  PythonRuntime rt;
  rt.runtime = runtime->st_value;
  // Py_Version is exported from 3.11 on; an older interpreter is a version loupe has no
  // layout for yet unless its file says otherwise (3.10: the name, left to the caller).
  if (version) {
    const long long off = file_offset_of(elf.get(), version->st_value, 4);
    std::uint32_t v = 0;
    if (off < 0 || ::pread(fd.get(), &v, 4, off) != 4)
      return make_error(path + ": Py_Version unreadable");
    rt.hexversion = v;
  }
  rt.eval.push_back({eval->st_value, eval->st_value + eval->st_size});
  for (const auto& cold : cold_parts(fd.get(), elf.get(), eval->st_value,
                                     eval->st_value + eval->st_size, syms.function_starts))
    rt.eval.push_back(cold);
  rt.layout = rt.hexversion ? python_layout(rt.major(), rt.minor()) : nullptr;
  return rt;
}

}  // namespace loupe
