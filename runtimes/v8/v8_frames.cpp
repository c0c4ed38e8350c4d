// SPDX-License-Identifier: Apache-2.0
#include "v8/v8_frames.hpp"

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <tuple>

#include "process_memory.hpp"
#include "session/health_report.hpp"

namespace loupe {

// What one binary's metadata says (v8dbg_*), and what naming derives from it.
struct V8Layout {
  std::string path;
  bool executable = false;  // ET_EXEC: no bias
  std::string version;
  std::uint64_t blob = 0, blob_size_at = 0;  // link-time
  loupe_v8_proc walk{};                      // the entry, without the process's addresses
  // Naming.
  std::uint32_t map = 0, itype = 0, first_nonstring = 0;
  std::uint32_t t_sfi = 0, t_scope = 0, t_script = 0, t_fixed_array = 0, t_bytecode = 0,
                t_byte_array = 0, t_code = 0;
  std::uint32_t sfi_data = 0, sfi_name = 0, sfi_script = 0;
  std::uint32_t scope_ncontext = 0, scope_first_vars = 0;
  std::uint32_t script_source = 0, script_name = 0, script_line_ends = 0;
  std::uint32_t fa_length = 0, fa_data = 0, bytecode_positions = 0, code_bytecode = 0;
  std::uint32_t str_length = 0, seq1 = 0, seq2 = 0, cons_first = 0, cons_second = 0,
                thin_actual = 0, sliced_parent = 0, sliced_offset = 0, ext_resource = 0;
  std::uint32_t rep_mask = 0, enc_mask = 0, one_byte = 0, rep_seq = 0, rep_cons = 0, rep_thin = 0,
                rep_sliced = 0, rep_external = 0;
  // Optimized code (walk.off_code != 0): the Code's tables and its DeoptimizationData's
  // slots (the inlined functions and where each was inlined).
  std::uint32_t code_positions = 0, code_deopt = 0;
  std::uint32_t dd_inlined_count = 0, dd_literals = 0, dd_sfi = 0, dd_inlining = 0;
};

// An optimized Code object as read while its process lived: what each pc offset of it runs,
// through the functions inlined there.
struct V8Code {
  std::uint64_t sfi = 0;  // the function whose code it is (untagged)
  struct Position {
    std::uint32_t pc = 0;       // from here on (to the next position)
    std::uint16_t inlined = 0;  // 0: the function's own; k: inlining[k - 1]
    std::uint32_t line = 0;     // in that function's script
  };
  std::vector<Position> positions;  // by pc
  struct Inlining {
    std::uint64_t sfi = 0;     // the inlined function (untagged)
    std::uint16_t caller = 0;  // where it was inlined: 0 the code's function, else k
    std::uint32_t caller_line = 0;
  };
  std::vector<Inlining> inlining;
};

struct V8Frames::Process {
  std::shared_ptr<const V8Layout> layout;
  // Exited: its entry is gone, what was read of it stays to name the stacks that hold it
  // (a plugin names some only at its final report).
  bool gone = false;
  loupe_v8_proc entry{};
  std::map<std::uint64_t, Function> functions;                  // by SharedFunctionInfo
  std::map<std::uint64_t, V8Code> codes;                        // by instruction start
  std::map<std::uint64_t, std::vector<std::uint32_t>> scripts;  // line ends, by Script
};

namespace {

constexpr std::size_t kMaxFunctions = 1 << 16;  // per process
constexpr std::size_t kMaxCodes = 1 << 14;      // per process
constexpr std::size_t kMaxGone = 64;            // exited processes whose names are kept
constexpr std::size_t kMaxSource = 64u << 20;   // bytes of a script scanned for its lines

// The binaries that carry a V8 this reads: node itself, or libnode (Node embedded). Named,
// so that every other file of every process is not opened to look for v8dbg_ symbols.
bool may_be_node(const std::string& path) {
  const std::string base = path.substr(path.rfind('/') + 1);
  return base == "node" || base == "nodejs" || base.rfind("node-", 0) == 0 ||
         base.rfind("libnode.so", 0) == 0;
}

// Whether node was asked to write its own map of JIT code (--perf-basic-prof, its
// -only-functions form, or --perf-prof's jitdump), on its command line or in NODE_OPTIONS:
// the user chose those names, and they win (symbols/ reads the map as for any JIT).
bool writes_perf_map(const std::string& proc_dir) {
  for (const char* file : {"/cmdline", "/environ"}) {
    std::ifstream in(proc_dir + file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::size_t at = 0; at < text.size();) {
      std::size_t end = text.find('\0', at);
      if (end == std::string::npos) end = text.size();
      std::string_view word(text.data() + at, end - at);
      at = end + 1;
      if (file[1] == 'e') {
        if (!word.starts_with("NODE_OPTIONS=")) continue;
        word.remove_prefix(13);
      }
      for (std::string_view flag :
           {"--perf-basic-prof", "--perf-prof", "--perf_basic_prof", "--perf_prof"})
        for (std::size_t f = word.find(flag); f != std::string_view::npos;
             f = word.find(flag, f + 1)) {
          if (f != 0 && word[f - 1] != ' ') continue;
          // Not --perf-prof-unwinding-info and the like; --perf-basic-prof-only-functions is.
          const std::string_view rest = word.substr(f + flag.size());
          if (rest.empty() || rest[0] == ' ' || rest.starts_with("-only-functions") ||
              rest.starts_with("_only_functions"))
            return true;
        }
    }
  }
  return false;
}

// `start`: where the binary's mapping of offset 0 begins (its bias, unless it is an
// executable loaded at its link-time addresses).
Result<std::shared_ptr<V8Layout>> make_layout(std::uint32_t pid, const std::string& path,
                                              std::uint64_t start) {
  const auto syms = elf_symbol_values(path, {"v8dbg_"});
  if (!syms.read) return make_error(path + ": not an ELF file loupe can read");
  const std::uint64_t bias = syms.executable ? 0 : start;
  if (syms.address.size() < 64) return make_error("no V8 postmortem metadata (v8dbg_*)");
  auto L = std::make_shared<V8Layout>();
  L->path = path;
  L->executable = syms.executable;
  std::string missing;
  bool ok = true;
  // The values live in the binary's data (0 in its bss): read from the process, as loaded.
  auto v = [&](std::string_view name) -> std::int64_t {
    auto it = syms.address.find(std::string("v8dbg_").append(name));
    if (it == syms.address.end()) {
      missing += std::string(missing.empty() ? "" : ", ") + std::string(name);
      return 0;
    }
    return read_process_value<std::int32_t>(pid, bias + it->second, &ok);
  };
  auto u = [&](std::string_view name) { return static_cast<std::uint32_t>(v(name)); };
  if (v("TaggedSize") != 8 || v("SmiShiftSize") != 31 || v("HeapObjectTag") != 1) {
    if (!ok) return make_error("its metadata could not be read");
    return make_error(
        "a V8 with pointer compression or another tagging (only 64-bit tagged "
        "pointers are read)");
  }
  L->map = u("class_HeapObject__map__Map");
  L->itype = u("class_Map__instance_type__uint16_t");
  L->first_nonstring = u("FirstNonstringType");
  L->t_scope = u("type_ScopeInfo__SCOPE_INFO_TYPE");
  L->t_script = u("type_Script__SCRIPT_TYPE");
  L->t_fixed_array = u("type_FixedArray__FIXED_ARRAY_TYPE");
  L->t_bytecode = u("type_BytecodeArray__BYTECODE_ARRAY_TYPE");
  L->t_byte_array = u("type_ByteArray__BYTE_ARRAY_TYPE");
  L->t_code = u("type_Code__CODE_TYPE");
  L->sfi_data = u("class_SharedFunctionInfo__function_data__Object");
  L->sfi_name = u("class_SharedFunctionInfo__name_or_scope_info__Object");
  L->sfi_script = u("class_SharedFunctionInfo__script_or_debug_info__HeapObject");
  L->scope_ncontext = u("scopeinfo_idx_ncontextlocals");
  L->scope_first_vars = u("scopeinfo_idx_first_vars");
  L->script_source = u("class_Script__source__Object");
  L->script_name = u("class_Script__name__Object");
  L->script_line_ends = u("class_Script__line_ends__Object");
  L->fa_length = u("class_FixedArrayBase__length__SMI");
  L->fa_data = u("class_FixedArray__data__uintptr_t");
  // Not in the metadata since V8 9.4: the third field after the length (OTel's rule).
  L->bytecode_positions = L->fa_length + 3 * 8;
  L->str_length = u("class_String__length__int32_t");
  L->seq1 = u("class_SeqOneByteString__chars__char");
  L->seq2 = u("class_SeqTwoByteString__chars__char");
  L->cons_first = u("class_ConsString__first__String");
  L->cons_second = u("class_ConsString__second__String");
  L->thin_actual = u("class_ThinString__actual__String");
  L->sliced_parent = u("class_SlicedString__parent__String");
  L->sliced_offset = u("class_SlicedString__offset__SMI");
  L->ext_resource = u("class_ExternalString__resource__Object");
  L->rep_mask = u("StringRepresentationMask");
  L->enc_mask = u("StringEncodingMask");
  L->one_byte = u("OneByteStringTag");
  L->rep_seq = u("SeqStringTag");
  L->rep_cons = u("ConsStringTag");
  L->rep_thin = u("ThinStringTag");
  L->rep_sliced = u("SlicedStringTag");
  L->rep_external = u("ExternalStringTag");

  auto& w = L->walk;
  w.fp_context = static_cast<std::int16_t>(v("off_fp_context"));
  w.fp_function = static_cast<std::int16_t>(v("off_fp_function"));
  w.fp_bytecode_offset = static_cast<std::int16_t>(v("off_fp_bytecode_offset"));
  w.off_map = static_cast<std::uint16_t>(L->map);
  w.off_instance_type = static_cast<std::uint16_t>(L->itype);
  w.off_shared = static_cast<std::uint16_t>(u("class_JSFunction__shared__SharedFunctionInfo"));
  w.type_jsfunction_first = static_cast<std::uint16_t>(u("type_JSFunction__JS_FUNCTION_TYPE"));
  // JSFunction's subtypes (class constructors, bound-like kinds) follow it: 15 since V8 9.6.
  w.type_jsfunction_last = static_cast<std::uint16_t>(w.type_jsfunction_first + 14);
  L->t_sfi = u("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE");
  w.bytecode_offset_bias =
      static_cast<std::uint16_t>(u("class_BytecodeArray__data__uintptr_t") - 1);
  L->code_positions = u("class_Code__source_position_table__ByteArray");
  L->code_deopt = u("class_Code__deoptimization_data__FixedArray");
  L->dd_inlined_count = u("DeoptimizationDataInlinedFunctionCountIndex");
  L->dd_literals = u("DeoptimizationDataLiteralArrayIndex");
  L->dd_sfi = u("DeoptimizationDataSharedFunctionInfoIndex");
  L->dd_inlining = u("DeoptimizationDataInliningPositionsIndex");
  const std::uint32_t kind_mask = u("CodeKindFieldMask");
  const std::uint32_t kind_baseline = u("CodeKindBaseline");
  const std::int64_t kind_shift = v("CodeKindFieldShift");
  if (!missing.empty()) return make_error("its metadata lacks " + missing);
  if (!ok) return make_error("its metadata could not be read");

  const auto other =
      elf_symbol_values(path, {"v8_Default_embedded_blob_code", "_ZN2v88internal7Version"}, true);
  auto addr = [&](const char* name) -> std::uint64_t {
    auto it = other.address.find(name);
    return it == other.address.end() ? 0 : it->second;
  };
  L->blob = addr("v8_Default_embedded_blob_code_");
  L->blob_size_at = addr("v8_Default_embedded_blob_code_size_");
  std::int32_t ver[4] = {-1, -1, -1, -1};
  const char* ver_syms[4] = {"_ZN2v88internal7Version6major_E", "_ZN2v88internal7Version6minor_E",
                             "_ZN2v88internal7Version6build_E", "_ZN2v88internal7Version6patch_E"};
  bool ver_ok = true;
  for (int i = 0; i < 4; ++i)
    if (std::uint64_t a = addr(ver_syms[i]))
      ver[i] = read_process_value<std::int32_t>(pid, bias + a, &ver_ok);
  if (ver_ok && ver[0] >= 0 && ver[1] >= 0 && ver[2] >= 0)
    L->version = fmt::format("{}.{}.{}", ver[0], ver[1], ver[2]);
  // Optimized code, by pc: V8 11's Code (the metadata lost its instruction start, size and
  // flags, and JSFunction::code, in V8 11; where they are follows V8's own layout of each
  // version, as OTel's profiler has it): instruction start two words after the source
  // positions, the flags a word after it, the size after the flags (and, before 11.4.59,
  // after the builtin id and kind-specific flags). Other versions: by function only.
  const auto at_least = [&](int a, int b, int c) {
    return std::tie(ver[0], ver[1], ver[2]) >= std::make_tuple(a, b, c);
  };
  if (ver_ok && ver[0] == 11 && kind_shift == 0 && kind_mask && kind_mask < 0x100 &&
      L->code_positions && L->code_deopt && L->dd_inlining) {
    w.off_code = static_cast<std::uint16_t>(w.off_shared + (at_least(11, 7, 368) ? -8 : 24));
    w.off_code_start = static_cast<std::uint16_t>(L->code_positions + 16);
    w.code_flags_at = 8;
    w.code_size_at = at_least(11, 4, 59) ? 12 : 16;
    w.code_kind_mask = static_cast<std::uint8_t>(kind_mask);
    w.code_kind_baseline = static_cast<std::uint8_t>(kind_baseline);
  }
  // Baseline code keeps its bytecode (V8 11); without the field, interpreted lines only.
  if (auto it = syms.address.find("v8dbg_class_Code__bytecode_or_interpreter_data__HeapObject");
      it != syms.address.end())
    L->code_bytecode = read_process_value<std::int32_t>(pid, bias + it->second, &ver_ok);
  return L;
}

// Reads of one process's heap by its layout.
class Heap {
 public:
  Heap(std::uint32_t pid, const V8Layout& L) : pid_(pid), L_(L) {}

  static bool is_heap(std::uint64_t w) { return (w & 3) == 1; }
  static bool is_smi(std::uint64_t w) { return (w & 1) == 0; }
  static std::int32_t smi(std::uint64_t w) { return static_cast<std::int32_t>(w >> 32); }

  std::uint64_t field(std::uint64_t tagged, std::uint32_t off) {
    bool ok = true;
    const auto v = read_process_value<std::uint64_t>(pid_, tagged - 1 + off, &ok);
    return ok ? v : 0;
  }
  // The instance type of a tagged heap object; UINT32_MAX when it is none.
  std::uint32_t type(std::uint64_t tagged) {
    if (!is_heap(tagged)) return UINT32_MAX;
    const std::uint64_t map = field(tagged, L_.map);
    if (!is_heap(map)) return UINT32_MAX;
    bool ok = true;
    const auto t = read_process_value<std::uint16_t>(pid_, map - 1 + L_.itype, &ok);
    return ok ? t : UINT32_MAX;
  }
  // A String's text (Latin-1 and UTF-16 as UTF-8), up to `limit` characters; false when
  // it is not a string or cannot be read.
  bool string(std::uint64_t tagged, std::string* out, std::size_t limit = 1024, int depth = 8) {
    const std::uint32_t t = type(tagged);
    if (t >= L_.first_nonstring || depth == 0) return false;
    bool ok = true;
    const auto n = read_process_value<std::int32_t>(pid_, tagged - 1 + L_.str_length, &ok);
    if (!ok || n < 0) return false;
    const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(n), limit);
    const bool one = (t & L_.enc_mask) == L_.one_byte;
    const std::uint32_t rep = t & L_.rep_mask;
    if (rep == L_.rep_seq) return chars(tagged - 1 + (one ? L_.seq1 : L_.seq2), len, one, out);
    if (rep == L_.rep_external) {
      // The resource's cached data pointer follows it (ExternalString::resource_data).
      const std::uint64_t data = field(tagged, L_.ext_resource + 8);
      return data && chars(data, len, one, out);
    }
    if (rep == L_.rep_cons) {
      std::string a, b;
      if (!string(field(tagged, L_.cons_first), &a, limit, depth - 1)) return false;
      if (a.size() < limit) string(field(tagged, L_.cons_second), &b, limit - a.size(), depth - 1);
      *out = a + b;
      return true;
    }
    if (rep == L_.rep_thin) return string(field(tagged, L_.thin_actual), out, limit, depth - 1);
    if (rep == L_.rep_sliced) {
      const std::uint64_t off = field(tagged, L_.sliced_offset);
      std::string parent;
      if (!is_smi(off) || smi(off) < 0 ||
          !string(field(tagged, L_.sliced_parent), &parent,
                  static_cast<std::size_t>(smi(off)) + len, depth - 1))
        return false;
      *out = parent.substr(std::min(parent.size(), static_cast<std::size_t>(smi(off))), len);
      return true;
    }
    return false;
  }

 private:
  bool chars(std::uint64_t at, std::size_t len, bool one, std::string* out) {
    if (one) {
      std::string raw(len, '\0');
      if (len && !read_process_memory(pid_, at, raw.data(), len)) return false;
      out->clear();
      for (unsigned char c : raw) {
        if (c < 0x80) {
          out->push_back(static_cast<char>(c));
        } else {
          out->push_back(static_cast<char>(0xc0 | (c >> 6)));
          out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
        }
      }
      return true;
    }
    std::vector<std::uint16_t> raw(len);
    if (len && !read_process_memory(pid_, at, raw.data(), len * 2)) return false;
    out->clear();
    for (std::uint16_t c : raw) {  // the BMP; surrogates pass through as they are
      if (c < 0x80) {
        out->push_back(static_cast<char>(c));
      } else if (c < 0x800) {
        out->push_back(static_cast<char>(0xc0 | (c >> 6)));
        out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
      } else {
        out->push_back(static_cast<char>(0xe0 | (c >> 12)));
        out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
        out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
      }
    }
    return true;
  }

  std::uint32_t pid_;
  const V8Layout& L_;
};

// A zigzag VLQ of a source position table; false at the end.
bool vlq(const std::vector<std::uint8_t>& b, std::size_t* i, std::int64_t* out) {
  std::uint64_t v = 0;
  for (int shift = 0; *i < b.size() && shift < 63; shift += 7) {
    const std::uint8_t c = b[(*i)++];
    v |= static_cast<std::uint64_t>(c & 0x7f) << shift;
    if (!(c & 0x80)) {
      *out = static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
      return true;
    }
  }
  return false;
}

std::uint32_t line_of(const std::vector<std::uint32_t>& ends, std::int64_t pos) {
  if (pos < 0) return 0;
  return static_cast<std::uint32_t>(
             std::lower_bound(ends.begin(), ends.end(), static_cast<std::uint32_t>(pos)) -
             ends.begin()) +
         1;
}

}  // namespace

std::uint32_t V8Frames::Function::line_at(std::uint32_t offset) const {
  std::uint32_t line = first_line;
  for (const auto& [o, l] : lines) {
    if (o > offset) break;
    line = l;
  }
  return line;
}

V8Frames::V8Frames(std::string proc_root, bool enabled)
    : proc_root_(std::move(proc_root)), enabled_(enabled) {}
V8Frames::~V8Frames() = default;

std::vector<RuntimeMapSpec> V8Frames::maps() const {
  return {{"loupe_v8_procs", BPF_MAP_TYPE_HASH, 4, sizeof(loupe_v8_proc), 256, BPF_F_NO_PREALLOC}};
}

Status V8Frames::attach(const std::map<std::string, int>& fds) {
  auto it = fds.find("loupe_v8_procs");
  if (it == fds.end()) return make_error("no loupe_v8_procs map");
  procs_fd_ = it->second;
  return {};
}

Runtime::Update V8Frames::update(std::uint32_t pid, const std::vector<MapsEntry>& maps) {
  const MapsEntry* bin = nullptr;
  for (const auto& m : maps)
    if (m.offset == 0 && m.file_backed() && may_be_node(m.path)) {
      bin = &m;
      break;
    }
  if (procs_fd_ < 0 || !enabled_) return Update::kNo;
  if (bin) {
    std::lock_guard lock(mu_);
    if (by_perf_map_.count(pid)) return Update::kNo;
  }
  if (bin && writes_perf_map(proc_root_ + "/" + std::to_string(pid))) {
    forget(pid);
    std::lock_guard lock(mu_);
    if (by_perf_map_.insert(pid).second) ++perf_map_processes_;
    return Update::kNo;
  }
  if (!bin) {
    // Exec'd into another program, or exiting (a zombie's maps read empty, before its exit
    // is told): what was read of it stays to name the stacks that hold it.
    forget(pid);
    return Update::kNo;
  }
  std::unique_lock lock(mu_);
  if (auto it = procs_.find(pid);
      it != procs_.end() && !it->second->gone && it->second->layout->path == bin->path)
    return Update::kYes;
  std::shared_ptr<const V8Layout> layout;
  const std::string path = bin->path;
  const bool known = layouts_.count(path) > 0;
  if (known) layout = layouts_[path];
  lock.unlock();
  if (!known) {
    auto made = make_layout(pid, path, bin->start);
    lock.lock();
    if (!made) {
      layouts_[path] = nullptr;
      if (unsupported_.insert(path + ": " + made.error()).second)
        spdlog::warn(
            "pid {} runs {}, whose JavaScript frames loupe cannot read ({}): its "
            "stacks keep their native frames, JIT code by address",
            pid, path, made.error());
      return Update::kNo;
    }
    layouts_[path] = *made;
    layout = *made;
    lock.unlock();
  }
  if (!layout) return Update::kNo;
  loupe_v8_proc e = layout->walk;
  const std::uint64_t bias = layout->executable ? 0 : bin->start;
  if (layout->blob && layout->blob_size_at) {
    bool ok = true;
    const auto size = read_process_value<std::uint32_t>(pid, bias + layout->blob_size_at, &ok);
    if (ok && size) {
      e.blob_low = bias + layout->blob;
      e.blob_high = e.blob_low + size;
    }
  }
  lock.lock();
  auto p = std::make_unique<Process>();
  p->layout = layout;
  p->entry = e;
  if (bpf_map_update_elem(procs_fd_, &pid, &e, BPF_ANY) != 0) {
    ++write_errors_;
    return Update::kNo;
  }
  procs_[pid] = std::move(p);
  ++processes_seen_;
  return Update::kYes;
}

void V8Frames::forget(std::uint32_t pid) {
  std::lock_guard lock(mu_);
  by_perf_map_.erase(pid);
  auto it = procs_.find(pid);
  if (it == procs_.end() || it->second->gone) return;
  if (procs_fd_ >= 0) bpf_map_delete_elem(procs_fd_, &pid);
  it->second->gone = true;
  it->second->scripts.clear();  // only a live process's functions are read
  // A system-wide session sees node processes come and go: the names of the last
  // kMaxGone are kept.
  std::size_t gone = 0;
  for (const auto& [p, proc] : procs_) gone += proc->gone;
  for (auto g = procs_.begin(); gone > kMaxGone && g != procs_.end();)
    if (g->second->gone && g->first != pid) {
      g = procs_.erase(g);
      --gone;
    } else {
      ++g;
    }
}

bool V8Frames::entry(std::uint32_t pid, loupe_v8_proc* out) const {
  std::lock_guard lock(mu_);
  auto it = procs_.find(pid);
  if (it == procs_.end() || it->second->gone) return false;
  *out = it->second->entry;
  return true;
}

std::string V8Frames::version(std::uint32_t pid) const {
  std::lock_guard lock(mu_);
  auto it = procs_.find(pid);
  return it == procs_.end() ? std::string() : it->second->layout->version;
}

void V8Frames::seen(const loupe_runtime_seen_key& key) {
  std::lock_guard lock(mu_);
  auto it = procs_.find(key.tgid);
  if (it == procs_.end() || it->second->gone) return;
  if (key.kind == LOUPE_V8_SEEN_SFI && !it->second->functions.count(key.ptr))
    read_locked(*it->second, key.tgid, key.ptr);
  if (key.kind == LOUPE_V8_SEEN_CODE) read_code_locked(*it->second, key.tgid, key.ptr, key.token);
}

// The Code's source positions (pc offset -> position, whose inlining id says in which of the
// functions inlined there) and its DeoptimizationData (the inlined functions, and where each
// was inlined), decoded into lines now: the scripts' line ends are read only while the
// process lives.
void V8Frames::read_code_locked(Process& p, std::uint32_t pid, std::uint64_t code_addr,
                                std::uint64_t sfi) {
  if (p.codes.size() >= kMaxCodes) return;
  const V8Layout& L = *p.layout;
  Heap h(pid, L);
  const std::uint64_t code = code_addr + 1;
  auto fail = [&] { ++codes_failed_; };
  if (h.type(code) != L.t_code) return fail();
  const std::uint64_t start = h.field(code, p.entry.off_code_start);
  if (!start || (start & 63) || p.codes.count(start)) return;
  // The slots of a FixedArray-shaped object (FixedArray, WeakFixedArray), up to `max`.
  auto slots = [&](std::uint64_t arr, std::size_t max, std::vector<std::uint64_t>* out) {
    const std::uint64_t n = h.field(arr, L.fa_length);
    if (!Heap::is_heap(arr) || !Heap::is_smi(n) || Heap::smi(n) < 0) return false;
    out->resize(std::min<std::size_t>(static_cast<std::size_t>(Heap::smi(n)), max));
    return out->empty() ||
           read_process_memory(pid, arr - 1 + L.fa_data, out->data(), out->size() * 8);
  };
  auto bytes = [&](std::uint64_t arr, std::vector<std::uint8_t>* out) {
    const std::uint64_t n = h.type(arr) == L.t_byte_array ? h.field(arr, L.fa_length) : 1;
    if (!Heap::is_smi(n) || Heap::smi(n) < 0 || Heap::smi(n) > (1 << 22)) return false;
    out->resize(static_cast<std::size_t>(Heap::smi(n)));
    return out->empty() || read_process_memory(pid, arr - 1 + L.fa_data, out->data(), out->size());
  };
  // Code that cannot deoptimize has empty deoptimization data: its function is the one the
  // walk told, and nothing was inlined into it.
  std::vector<std::uint64_t> dd;
  const std::size_t need =
      std::max({L.dd_inlined_count, L.dd_literals, L.dd_sfi, L.dd_inlining}) + 1;
  if (h.type(h.field(code, L.code_deopt)) != L.t_fixed_array ||
      !slots(h.field(code, L.code_deopt), need, &dd) || (!dd.empty() && dd.size() < need))
    return fail();
  V8Code c;
  c.sfi = sfi;
  auto known = p.functions.find(sfi);
  const Function* outer = known != p.functions.end() ? &known->second : read_locked(p, pid, sfi);
  if (!outer) return fail();
  // The inlined functions: the first `count` literals (weak references, some).
  std::int32_t count = 0;
  if (!dd.empty())
    count = Heap::is_smi(dd[L.dd_inlined_count]) ? Heap::smi(dd[L.dd_inlined_count]) : -1;
  std::vector<std::uint64_t> literals;
  std::vector<std::uint8_t> inlining;
  if (count < 0 ||
      (count > 0 &&
       (!slots(dd[L.dd_literals], static_cast<std::size_t>(count), &literals) ||
        literals.size() < static_cast<std::size_t>(count) || !bytes(dd[L.dd_inlining], &inlining))))
    return fail();
  // Each InliningPosition: the call's SourcePosition (8 bytes), the inlined function's index
  // among the literals (int32), padding.
  const auto script_line = [&](const Function* f, std::uint64_t pos) -> std::uint32_t {
    if (!f) return 0;
    if (pos & 1) return f->first_line;  // external (a position in another file): not this one's
    auto s = p.scripts.find(f->script);
    const std::int64_t offset = static_cast<std::int64_t>((pos >> 1) & ((1u << 30) - 1)) - 1;
    return s == p.scripts.end() || offset < 0 ? f->first_line : line_of(s->second, offset);
  };
  std::vector<const Function*> fns;  // by inlining id - 1
  for (std::size_t k = 0; k + 16 <= inlining.size(); k += 16) {
    std::uint64_t pos;
    std::int32_t index;
    std::memcpy(&pos, &inlining[k], 8);
    std::memcpy(&index, &inlining[k + 8], 4);
    V8Code::Inlining in;
    const Function* f = outer;
    if (index >= 0 && index < count) {
      const std::uint64_t lit = literals[static_cast<std::size_t>(index)] & ~std::uint64_t{2};
      if (const Function* g = Heap::is_heap(lit) ? read_locked(p, pid, lit - 1) : nullptr) {
        f = g;
        in.sfi = lit - 1;
      }
    }
    if (!in.sfi) in.sfi = c.sfi;
    in.caller = static_cast<std::uint16_t>(pos >> 31);
    c.inlining.push_back(in);
    fns.push_back(f);
  }
  // Callers' lines, once every function is known (a caller is inlined before its callee).
  for (std::size_t k = 0, i = 0; k + 16 <= inlining.size(); k += 16, ++i) {
    std::uint64_t pos;
    std::memcpy(&pos, &inlining[k], 8);
    const std::uint16_t caller = c.inlining[i].caller;
    c.inlining[i].caller_line = script_line(caller == 0            ? outer
                                            : caller <= fns.size() ? fns[caller - 1]
                                                                   : nullptr,
                                            pos);
  }
  std::vector<std::uint8_t> table;
  if (!bytes(h.field(code, L.code_positions), &table)) return fail();
  std::int64_t pc = -1, pos = 0, d = 0;
  std::size_t i = 0;
  while (vlq(table, &i, &d)) {
    pc += d >= 0 ? d : -(d + 1);  // negative: not a statement
    if (!vlq(table, &i, &d)) break;
    pos += d;
    const auto id = static_cast<std::uint16_t>(static_cast<std::uint64_t>(pos) >> 31);
    const Function* f = id == 0 ? outer : id <= fns.size() ? fns[id - 1] : nullptr;
    if (!f) continue;
    c.positions.push_back(
        {static_cast<std::uint32_t>(pc), id, script_line(f, static_cast<std::uint64_t>(pos))});
  }
  ++codes_read_;
  p.codes[start] = std::move(c);
}

const V8Frames::Function* V8Frames::read_function(std::uint32_t pid, std::uint64_t sfi) {
  std::lock_guard lock(mu_);
  auto it = procs_.find(pid);
  if (it == procs_.end()) return nullptr;
  if (auto f = it->second->functions.find(sfi); f != it->second->functions.end()) return &f->second;
  return it->second->gone ? nullptr : read_locked(*it->second, pid, sfi);
}

const V8Frames::Function* V8Frames::read_locked(Process& p, std::uint32_t pid,
                                                std::uint64_t sfi_addr) {
  if (p.functions.size() >= kMaxFunctions) return nullptr;
  const V8Layout& L = *p.layout;
  Heap h(pid, L);
  const std::uint64_t sfi = sfi_addr + 1;  // tagged
  if (h.type(sfi) != L.t_sfi) {
    ++read_failed_;
    return nullptr;
  }
  Function f;
  // The name: a String, or the ScopeInfo's function name (its own, else the one V8
  // inferred), found as OTel's profiler does for V8 before 12.8: after the context locals'
  // names and infos, the first non-empty string, up to the function's start and end
  // positions (two small integers, the first below the second).
  std::int64_t start = -1;
  const std::uint64_t nos = h.field(sfi, L.sfi_name);
  const std::uint32_t nos_type = h.type(nos);
  if (nos_type == L.t_scope) {
    std::uint64_t slots[24] = {};
    if (read_process_memory(pid, nos - 1 + 8, slots, sizeof(slots))) {
      const std::int32_t n = Heap::smi(slots[L.scope_ncontext]);
      // 75 or more context locals: their names are one hash table instead.
      const std::int64_t skip = n < 75 ? 2 * static_cast<std::int64_t>(n) : 1 + n;
      std::uint64_t prev = 1;
      for (std::int64_t i = L.scope_first_vars + std::max<std::int64_t>(0, skip); i < 24; ++i) {
        const std::uint64_t cur = slots[i];
        std::string s;
        if (f.name.empty() && Heap::is_heap(cur) && h.string(cur, &s) && !s.empty())
          f.name = std::move(s);
        if (Heap::is_smi(cur) && Heap::is_smi(prev) && Heap::smi(prev) < Heap::smi(cur)) {
          start = Heap::smi(prev);
          break;
        }
        prev = cur;
      }
    }
  } else if (nos_type < L.first_nonstring) {
    h.string(nos, &f.name);
  }
  if (f.name.empty()) f.name = "<anonymous>";
  // The script: its name, and its line ends (V8's own array when made, else the source's
  // newlines), read once per script.
  const std::uint64_t script = h.field(sfi, L.sfi_script);
  const std::vector<std::uint32_t>* ends = nullptr;
  if (h.type(script) == L.t_script) {
    f.script = script;
    h.string(h.field(script, L.script_name), &f.file, 4096);
    auto [it, fresh] = p.scripts.try_emplace(script);
    if (fresh) {
      const std::uint64_t le = h.field(script, L.script_line_ends);
      if (h.type(le) == L.t_fixed_array) {
        const std::uint64_t n = h.field(le, L.fa_length);
        if (Heap::is_smi(n) && Heap::smi(n) > 0 && Heap::smi(n) < (1 << 24)) {
          std::vector<std::uint64_t> raw(static_cast<std::size_t>(Heap::smi(n)));
          if (read_process_memory(pid, le - 1 + L.fa_data, raw.data(), raw.size() * 8))
            for (std::uint64_t w : raw)
              it->second.push_back(static_cast<std::uint32_t>(Heap::smi(w)));
        }
      } else {
        std::string src;
        if (h.string(h.field(script, L.script_source), &src, kMaxSource))
          for (std::size_t i = 0; i < src.size(); ++i)
            if (src[i] == '\n') it->second.push_back(static_cast<std::uint32_t>(i));
      }
    }
    ends = &it->second;
  }
  if (ends && start >= 0) f.first_line = line_of(*ends, start);
  // An interpreted frame's line: its bytecode's source positions (the table V8 keeps with
  // the bytecode; baseline code keeps the bytecode too).
  std::uint64_t bytecode = h.field(sfi, L.sfi_data);
  if (L.code_bytecode && h.type(bytecode) == L.t_code)
    bytecode = h.field(bytecode, L.code_bytecode);
  if (ends && h.type(bytecode) == L.t_bytecode) {
    const std::uint64_t table = h.field(bytecode, L.bytecode_positions);
    const std::uint64_t n = h.type(table) == L.t_byte_array ? h.field(table, L.fa_length) : 0;
    if (Heap::is_smi(n) && Heap::smi(n) > 0 && Heap::smi(n) < (1 << 20)) {
      std::vector<std::uint8_t> b(static_cast<std::size_t>(Heap::smi(n)));
      if (read_process_memory(pid, table - 1 + L.fa_data, b.data(), b.size())) {
        std::int64_t code = -1, pos = 0, d = 0;
        std::size_t i = 0;
        while (vlq(b, &i, &d)) {
          code += d >= 0 ? d : -(d + 1);  // negative: not a statement
          if (!vlq(b, &i, &d)) break;
          pos += d;
          const std::uint32_t line = line_of(*ends, ((pos >> 1) & ((1 << 30) - 1)) - 1);
          if (line && (f.lines.empty() || f.lines.back().second != line))
            f.lines.emplace_back(static_cast<std::uint32_t>(code), line);
        }
      }
    }
  }
  ++functions_read_;
  return &(p.functions[sfi_addr] = std::move(f));
}

std::uint32_t V8Frames::name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                             std::uint32_t max) {
  if (max == 0) return 0;
  const std::uint64_t payload = LOUPE_RUNTIME_PAYLOAD(frame);
  if (LOUPE_V8_TIER(payload) == LOUPE_V8_OPTIMIZED) return name_code(pid, payload, out, max);
  const std::uint64_t sfi = LOUPE_V8_SFI(payload);
  const Function* f = read_function(pid, sfi);
  if (!f) {
    std::lock_guard lock(mu_);
    ++unnamed_;
    return 0;
  }
  out->address = sfi;
  out->function = f->name;
  out->file = f->file;
  const std::uint64_t offset = LOUPE_V8_OFFSET(payload);
  out->line = LOUPE_V8_TIER(payload) == LOUPE_V8_INTERPRETED && offset != LOUPE_V8_OFFSET_UNKNOWN
                  ? f->line_at(static_cast<std::uint32_t>(offset))
                  : f->first_line;
  out->kind = LOUPE_FRAME_JS;
  out->resolution = LOUPE_RESOLVED_RUNTIME;
  return 1;
}

// An optimized frame: the function running at its pc, then each function it was inlined
// into, out to the code's own function (innermost first, as a stack is).
std::uint32_t V8Frames::name_code(std::uint32_t pid, std::uint64_t payload,
                                  Symbolizer::RuntimeName* out, std::uint32_t max) {
  std::lock_guard lock(mu_);
  auto p = procs_.find(pid);
  const auto c = p == procs_.end() ? decltype(p->second->codes)::const_iterator{}
                                   : p->second->codes.find(LOUPE_V8_CODE_START(payload));
  if (p == procs_.end() || c == p->second->codes.end()) {
    ++unnamed_;
    return 0;
  }
  const V8Code& code = c->second;
  const auto& fns = p->second->functions;
  const auto pc = static_cast<std::uint32_t>(LOUPE_V8_CODE_OFFSET(payload));
  auto at = std::upper_bound(code.positions.begin(), code.positions.end(), pc,
                             [](std::uint32_t v, const V8Code::Position& q) { return v < q.pc; });
  std::uint16_t id = 0;
  std::uint32_t line = 0;
  if (at != code.positions.begin()) {
    id = std::prev(at)->inlined;
    line = std::prev(at)->line;
  }
  std::uint32_t n = 0;
  auto emit = [&](std::uint64_t sfi, std::uint32_t l) {
    auto f = fns.find(sfi);
    if (f == fns.end() || n >= max) return;
    out[n].address = sfi;
    out[n].function = f->second.name;
    out[n].file = f->second.file;
    out[n].line = l ? l : f->second.first_line;
    out[n].kind = LOUPE_FRAME_JS;
    out[n].resolution = LOUPE_RESOLVED_RUNTIME;
    ++n;
  };
  for (int guard = 0; id != 0 && id <= code.inlining.size() && guard < 64; ++guard) {
    const V8Code::Inlining& in = code.inlining[id - 1];
    emit(in.sfi, line);
    if (in.caller >= id)
      break;  // callers are inlined first: a table that says otherwise is not one
    line = in.caller_line;
    id = in.caller;
  }
  emit(code.sfi, line);
  inlined_named_ += n > 1 ? n - 1 : 0;
  if (n == 0) ++unnamed_;
  return n;
}

void V8Frames::report_health(HealthReport& health) const {
  std::lock_guard lock(mu_);
  if (!processes_seen_ && unsupported_.empty() && !perf_map_processes_) return;
  const std::string comp = "v8_frames";
  const auto warn_if = [](std::uint64_t v) { return v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK; };
  health.health("v8_processes", comp, processes_seen_, LOUPE_HEALTH_OK,
                fmt::format("Node.js processes whose JavaScript frames were read from V8's own "
                            "structures (no flag, no restart); {} function(s) read, {} optimized "
                            "code object(s) whose inlined functions are frames of their own ({} "
                            "such frames named)",
                            functions_read_, codes_read_, inlined_named_),
                true);
  health.health("v8_by_perf_map", comp, perf_map_processes_, LOUPE_HEALTH_OK,
                perf_map_processes_
                    ? "Node.js processes started with --perf-basic-prof or --perf-prof: their JIT "
                      "frames are named by the map they write, as asked (functions by code "
                      "object, no inlined functions; interpreted time under bytecode handlers)"
                    : "",
                true);
  health.health(
      "v8_unsupported", comp, unsupported_.size(), warn_if(unsupported_.size()),
      unsupported_.empty() ? "" : "binaries whose V8 loupe cannot read: " + *unsupported_.begin(),
      true);
  health.health("v8_unreadable", comp, read_failed_, warn_if(read_failed_),
                read_failed_ ? "functions the stacks met that could not be read (the process "
                               "was gone, or the collector had moved them)"
                             : "",
                true, {functions_read_ + read_failed_, "functions", LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("v8_code_unreadable", comp, codes_failed_, warn_if(codes_failed_),
                codes_failed_ ? "optimized code objects the stacks met that could not be read: "
                                "their frames are unnamed (the process was gone, or the code "
                                "was collected first)"
                              : "",
                true, {codes_read_ + codes_failed_, "code objects", LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("v8_frames_unnamed", comp, unnamed_, warn_if(unnamed_),
                unnamed_ ? "JavaScript frames named by their tag only" : "", true,
                {0, nullptr, LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("v8_entries_refused", comp, write_errors_, warn_if(write_errors_),
                write_errors_ ? "Node.js processes the kernel's map refused (it holds 256): their "
                                "JavaScript frames stay JIT code by address"
                              : "",
                true);
}

}  // namespace loupe
