// SPDX-License-Identifier: Apache-2.0
#include "python/python_runtime.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "loupe/unwind.h"
#include "symbols/eh_frame_ranges.hpp"
#include "symbols/elf_file.hpp"
#include "symbols/process_maps.hpp"
#include "util/unique_fd.hpp"

namespace loupe {
namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

// x86-64 release builds. Sources: the Python frames issue's research table (OpenTelemetry's
// python.go constants and type-object introspection, py-spy's generated bindings, Parca's
// runtime-data layouts); 3.11's checked against Debian's 3.11.2 (PyCode_Type's members,
// PyThreadState_GetFrame, _PyFrame_IsEntryFrame, PyGILState_GetThisThreadState).
constexpr PythonLayout kLayouts[] = {
    // major minor key tstate cframe code prev instr entry first file name qual line adapt ascii
    // compact
    {3, 10, 588, 24, kNone, 32, 24, 96, 0, 40, 104, 112, 0, 120, 0, 48, 72},
    {3, 11, 596, 56, 8, 32, 48, 56, 68, 72, 112, 120, 128, 136, 184, 48, 72},
    {3, 12, 1548, 56, 0, 0, 8, 56, 70, 68, 112, 120, 128, 136, 192, 40, 56},
    // 3.13: the thread state's current_frame (no cframe); everything but the key and the
    // compact string's data is replaced by the interpreter's own _Py_DebugOffsets when read
    // (read_python_runtime). The key's offset is offsetof(_PyRuntimeState, autoTSSkey) in
    // 3.13.0's internal headers (2160) plus _is_initialized before the key.
    {3, 13, 2164, 72, kNone, 0, 8, 56, 70, 68, 112, 120, 128, 136, 200, 40, 56},
};

// Layouts made from an interpreter's _Py_DebugOffsets: kept for the program's life (a few
// per run at most, one per build seen), so a layout pointer stays valid however the
// runtime that found it is copied.
const PythonLayout* intern_layout(const PythonLayout& l) {
  static std::mutex mu;
  static std::deque<PythonLayout> made;
  std::lock_guard lock(mu);
  for (const auto& m : made)
    if (std::memcmp(&m, &l, sizeof(l)) == 0) return &m;
  return &made.emplace_back(l);
}

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

// The parts of a function the compiler moved out of it (GCC's ".cold" split): code its
// near jumps reach outside [start, end), in an FDE of its own that no function symbol
// starts. Scanning bytes for jump opcodes also meets operands that look like one; only a
// target inside such an unnamed FDE counts, which an operand's does not by chance.
std::vector<CodeRange> cold_parts(const ElfFile& file, std::uint64_t start, std::uint64_t end,
                                  const std::vector<std::uint64_t>& function_starts) {
  std::vector<CodeRange> out;
  const long long off = file_offset_of(file.get(), start, end - start);
  if (off < 0 || end - start > (8u << 20)) return out;
  std::vector<std::uint8_t> code(end - start);
  if (::pread(file.fd(), code.data(), code.size(), off) != static_cast<ssize_t>(code.size()))
    return out;
  const std::vector<FdeRange> fdes = file.eh_frame_ranges();
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

bool read_mem(int pid, std::uint64_t addr, void* out, std::size_t len) {
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

template <typename T>
bool read_value(int pid, std::uint64_t addr, T* out) {
  return read_mem(pid, addr, out, sizeof(T));
}

// A str object as UTF-8: compact ASCII, or compact UCS-1/2/4 (PEP 393). Names and paths
// longer than kMaxString are cut (a frame name is for reading, not for round trips).
constexpr std::uint64_t kMaxString = 4096;
bool read_str(int pid, std::uint64_t obj, const PythonLayout& l, std::string* out) {
  std::int64_t length = 0;
  std::uint32_t state = 0;
  if (!obj || !read_value(pid, obj + 16, &length) || !read_value(pid, obj + 32, &state) ||
      length < 0)
    return false;
  const std::uint64_t n = std::min<std::uint64_t>(static_cast<std::uint64_t>(length), kMaxString);
  const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || kind == 0 || kind == 3 || kind > 4) return false;
  std::string raw(n * kind, '\0');
  if (!read_mem(pid, obj + (ascii ? l.ascii_data : l.compact_data), raw.data(), raw.size()))
    return false;
  out->clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint32_t c = 0;
    std::memcpy(&c, raw.data() + i * kind, kind);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (c >> 6)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (c >> 12)));
      out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (c >> 18)));
      out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return true;
}

// A bytes object's contents (ob_size at 16, ob_sval at 32 in every supported version).
bool read_bytes(int pid, std::uint64_t obj, std::string* out) {
  std::int64_t size = 0;
  if (!obj || !read_value(pid, obj + 16, &size) || size < 0 || size > (1 << 20)) return false;
  out->assign(static_cast<std::size_t>(size), '\0');
  return size == 0 || read_mem(pid, obj + 32, out->data(), out->size());
}

}  // namespace

Result<PythonCode> read_python_code(int pid, std::uint64_t code, const PythonLayout& l) {
  PythonCode c;
  std::uint64_t name = 0, file = 0, table = 0;
  std::int32_t first = 0;
  const std::uint32_t name_at = l.code_qualname ? l.code_qualname : l.code_name;
  if (!read_value(pid, code + name_at, &name) || !read_value(pid, code + l.code_filename, &file) ||
      !read_value(pid, code + l.code_linetable, &table) ||
      !read_value(pid, code + l.code_firstlineno, &first))
    return make_error("pid " + std::to_string(pid) + ": code object unreadable");
  if (!read_str(pid, name, l, &c.qualname) || !read_str(pid, file, l, &c.filename))
    return make_error("pid " + std::to_string(pid) + ": code object's names unreadable");
  read_bytes(pid, table, &c.linetable);
  c.firstlineno = first > 0 ? static_cast<std::uint32_t>(first) : 0;
  return c;
}

std::uint32_t python_line(const PythonCode& code, std::uint32_t index, const PythonLayout& l) {
  const auto& t = code.linetable;
  std::int64_t line = code.firstlineno;
  if (l.minor < 11) {
    // 3.10: (bytes, line delta) pairs over byte offsets; a delta of -128 is "no line".
    const std::uint64_t at = 2ull * index;
    std::uint64_t end = 0;
    for (std::size_t i = 0; i + 1 < t.size(); i += 2) {
      const std::uint64_t start = end;
      end += static_cast<std::uint8_t>(t[i]);
      const auto delta = static_cast<std::int8_t>(t[i + 1]);
      if (delta != -128) line += delta;
      if (at >= start && at < end) return delta == -128 ? 0 : static_cast<std::uint32_t>(line);
    }
    return 0;
  }
  // 3.11+: entries of a first byte (bit 7 set; code in bits 3-6, length-1 in bits 0-2)
  // and the code's extra bytes (Objects/locations.md).
  std::size_t i = 0;
  auto varint = [&]() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; i < t.size(); shift += 6) {
      const auto b = static_cast<std::uint8_t>(t[i++]);
      v |= static_cast<std::uint64_t>(b & 63) << shift;
      if (!(b & 64)) break;
    }
    return v;
  };
  auto svarint = [&]() {
    const std::uint64_t u = varint();
    return (u & 1) ? -static_cast<std::int64_t>(u >> 1) : static_cast<std::int64_t>(u >> 1);
  };
  std::uint64_t start = 0;
  while (i < t.size()) {
    const auto b = static_cast<std::uint8_t>(t[i++]);
    if (!(b & 0x80)) continue;  // lost sync: on to the next entry's first byte
    const unsigned what = (b >> 3) & 15, len = (b & 7) + 1;
    bool none = false;
    if (what == 15) {
      none = true;
    } else if (what == 14) {
      line += svarint();
      varint();
      varint();
      varint();
    } else if (what == 13) {
      line += svarint();
    } else if (what >= 10) {
      line += what - 10;
      i += 2;
    } else {
      i += 1;
    }
    if (index >= start && index < start + len)
      return none || line <= 0 ? 0 : static_cast<std::uint32_t>(line);
    start += len;
  }
  return 0;
}

const PythonLayout* python_layout(std::uint32_t major, std::uint32_t minor) {
  for (const auto& l : kLayouts)
    if (l.major == major && l.minor == minor) return &l;
  return nullptr;
}

std::string PythonRuntime::version() const {
  const std::string mm = std::to_string(major()) + "." + std::to_string(minor());
  // A version from the file's name has no micro or release level (Py_Version always has one).
  return (hexversion & 0xffff) == 0 ? mm : mm + "." + std::to_string(micro());
}

namespace {

// "python3.10", "libpython3.10.so.1.0": the version a file's name says, as a hexversion
// without micro and release level; 0 when it says none.
std::uint32_t version_from_name(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.rfind("lib", 0) == 0) base.erase(0, 3);
  unsigned major = 0, minor = 0;
  if (std::sscanf(base.c_str(), "python%u.%u", &major, &minor) != 2 || major > 255 || minor > 255)
    return 0;
  return (major << 24) | (minor << 16);
}

// 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), the first member of
// _PyRuntime and statically initialised, so read from the file: uint64 fields, by index.
// Its layout holds within a minor version only; 3.14 reorders it (another table entry).
namespace dbg {
constexpr int kCookie = 0, kVersion = 1, kFreeThreaded = 2;
constexpr int kTstateCurrentFrame = 23;
constexpr int kFramePrevious = 29, kFrameExecutable = 30, kFrameInstr = 31, kFrameOwner = 33;
constexpr int kCodeFilename = 35, kCodeName = 36, kCodeQualname = 37, kCodeLinetable = 38,
              kCodeFirstlineno = 39, kCodeAdaptive = 43;
constexpr int kBytesObSize = 65, kBytesObSval = 66;
constexpr int kUnicodeState = 68, kUnicodeLength = 69, kUnicodeAsciiSize = 70;
constexpr int kCount = 73;
}  // namespace dbg

// The walk's offsets as the interpreter itself publishes them (a debug or other unusual
// build of 3.13 moves them), checked for what loupe cannot take from them: the cookie and
// version, a GIL build (free-threaded objects have another header), and the string and
// bytes fields the name reader assumes.
Result<PythonLayout> layout_from_debug_offsets(int fd, ::Elf* elf, std::uint64_t runtime,
                                               std::uint32_t hexversion, const PythonLayout& base) {
  std::uint64_t d[dbg::kCount] = {};
  const long long off = file_offset_of(elf, runtime, sizeof(d));
  if (off < 0 || ::pread(fd, d, sizeof(d), off) != static_cast<ssize_t>(sizeof(d)))
    return make_error("_Py_DebugOffsets unreadable");
  if (std::memcmp(&d[dbg::kCookie], "xdebugpy", 8) != 0)
    return make_error("no _Py_DebugOffsets at _PyRuntime");
  if ((d[dbg::kVersion] >> 16) != (hexversion >> 16))
    return make_error("_Py_DebugOffsets of another version");
  if (d[dbg::kFreeThreaded]) return make_error("a free-threaded build");
  if (d[dbg::kUnicodeLength] != 16 || d[dbg::kUnicodeState] != 32 || d[dbg::kBytesObSize] != 16 ||
      d[dbg::kBytesObSval] != 32)
    return make_error("objects laid out unlike a release build");
  const int frame_fields[] = {dbg::kFramePrevious, dbg::kFrameExecutable, dbg::kFrameInstr,
                              dbg::kFrameOwner};
  for (int f : frame_fields)
    if (d[f] + 8 > LOUPE_PYTHON_FRAME_BYTES)
      return make_error("frame fields beyond what the walk reads");
  PythonLayout l = base;
  auto u32 = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  l.tstate_frame = u32(d[dbg::kTstateCurrentFrame]);
  l.frame_code = u32(d[dbg::kFrameExecutable]);
  l.frame_previous = u32(d[dbg::kFramePrevious]);
  l.frame_instr = u32(d[dbg::kFrameInstr]);
  l.frame_entry = u32(d[dbg::kFrameOwner]);
  l.code_firstlineno = u32(d[dbg::kCodeFirstlineno]);
  l.code_filename = u32(d[dbg::kCodeFilename]);
  l.code_name = u32(d[dbg::kCodeName]);
  l.code_qualname = u32(d[dbg::kCodeQualname]);
  l.code_linetable = u32(d[dbg::kCodeLinetable]);
  l.code_adaptive = u32(d[dbg::kCodeAdaptive]);
  l.ascii_data = u32(d[dbg::kUnicodeAsciiSize]);
  if (l.code_qualname < l.code_firstlineno ||
      l.code_qualname - l.code_firstlineno > LOUPE_PYTHON_CODE_BYTES - 8)
    return make_error("code object fields beyond what the walk reads");
  return l;
}

}  // namespace

Result<PythonRuntime> read_python_runtime(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return make_error(path + ": " + std::strerror(errno));
  const ElfFile elf = ElfFile::borrow(fd.get());
  if (!elf.valid()) return make_error(path + ": not an ELF file");
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
  rt.path = path;
  rt.runtime = runtime->st_value;
  // Py_Version is exported from 3.11 on; before, the file's name says which (python3.10,
  // libpython3.10.so: the names every build installs).
  rt.hexversion = version_from_name(path);
  if (version) {
    const long long off = file_offset_of(elf.get(), version->st_value, 4);
    std::uint32_t v = 0;
    if (off < 0 || ::pread(fd.get(), &v, 4, off) != 4)
      return make_error(path + ": Py_Version unreadable");
    rt.hexversion = v;
  }
  rt.eval.push_back({eval->st_value, eval->st_value + eval->st_size});
  for (const auto& cold :
       cold_parts(elf, eval->st_value, eval->st_value + eval->st_size, syms.function_starts))
    rt.eval.push_back(cold);
  rt.layout = rt.hexversion ? python_layout(rt.major(), rt.minor()) : nullptr;
  if (rt.layout && rt.hexversion >= 0x030d0000) {
    auto own = layout_from_debug_offsets(fd.get(), elf.get(), runtime->st_value, rt.hexversion,
                                         *rt.layout);
    if (!own) {
      rt.unsupported = own.error();
      rt.layout = nullptr;
    } else {
      rt.layout = intern_layout(*own);
    }
  }
  return rt;
}

std::vector<CodeRange> PythonProcess::eval() const {
  std::vector<CodeRange> out;
  for (const auto& r : runtime.eval) out.push_back({r.start + bias, r.end + bias});
  return out;
}

Result<PythonProcess> find_python_process(const std::string& proc_root, std::uint32_t pid,
                                          const std::vector<MapsEntry>& maps,
                                          PythonRuntimeCache* cache) {
  std::vector<std::string> tried;
  for (const auto& m : maps) {
    if (!m.executable || !m.file_backed() || m.deleted ||
        std::find(tried.begin(), tried.end(), m.path) != tried.end())
      continue;
    tried.push_back(m.path);
    // Only files named like an interpreter are opened: a process maps dozens of libraries.
    const std::string base = m.path.substr(m.path.rfind('/') + 1);
    if (base.rfind("python", 0) != 0 && base.rfind("libpython", 0) != 0) continue;
    // Through the process's root: the file as it sees it, in its own mount namespace.
    const std::string at = proc_root + "/" + std::to_string(pid) + "/root" + m.path;
    const std::pair<std::uint64_t, std::uint64_t> key{
        (std::uint64_t{m.dev_major} << 32) | m.dev_minor, m.inode};
    std::shared_ptr<const PythonRuntime> rt;
    if (auto hit = cache ? cache->find(key) : PythonRuntimeCache::iterator{};
        cache && hit != cache->end()) {
      rt = hit->second;
    } else {
      auto read = read_python_runtime(at);
      if (read) rt = std::make_shared<const PythonRuntime>(std::move(read).value());
      if (cache) cache->emplace(key, rt);
    }
    if (!rt) continue;
    // The executable mapping's first byte is file offset m.offset: the segment holding it
    // gives its link-time address, and the bias is what moved it.
    UniqueFd fd(::open(at.c_str(), O_RDONLY | O_CLOEXEC));
    const ElfFile elf = ElfFile::borrow(fd.get());
    std::size_t n = 0;
    if (!elf.get() || elf_getphdrnum(elf.get(), &n) != 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf.get(), static_cast<int>(i), &ph) || ph.p_type != PT_LOAD ||
          !(ph.p_flags & PF_X))
        continue;
      const std::uint64_t aligned = ph.p_offset & ~std::uint64_t{0xfff};
      if (m.offset < aligned || m.offset >= ph.p_offset + ph.p_filesz) continue;
      PythonProcess p;
      p.runtime = *rt;
      p.runtime.path = m.path;
      p.bias = m.start - (ph.p_vaddr + m.offset - ph.p_offset);
      return p;
    }
  }
  return make_error("pid " + std::to_string(pid) + ": no CPython interpreter mapped");
}

}  // namespace loupe
