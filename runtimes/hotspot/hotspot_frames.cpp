// SPDX-License-Identifier: Apache-2.0
#include "hotspot/hotspot_frames.hpp"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "process_memory.hpp"
#include "session/health_report.hpp"

namespace loupe {

struct HotSpotLayout {
  std::string libjvm;
  std::uint64_t bias = 0;
  int major = 0;
  // Statics, runtime addresses in the JVM that was read (the same in every JVM of this
  // libjvm after adding its own bias; rebased per process).
  std::uint64_t heaps = 0, low_bound = 0, high_bound = 0, interp_code = 0;
  std::uint32_t ga_len = 0, ga_data = 0, heap_memory = 0, heap_segmap = 0, heap_log2 = 0,
                vs_low = 0, vs_high = 0, heap_block = 0;
  std::uint32_t sq_buffer = 0, sq_limit = 0;
  loupe_hotspot_proc walk{};  // the offsets part of the entry
  // Debug info: JDK 17 (CompiledMethod and offsets from the nmethod) or 23+ (immutable
  // and mutable data).
  bool immutable = false;
  std::uint32_t nm_method = 0, nm_compile_id = 0, nm_pcs = 0, nm_deps = 0, nm_metadata = 0,
                cm_scopes_data = 0, nm_scopes_data = 0, nm_imm = 0, nm_imm_size = 0, blob_mut = 0,
                blob_mut_size = 0, blob_reloc_size = 0, blob_code = 0, blob_data = 0;
  std::uint32_t cm_constants = 0, cm_flags = 0, cm_code_size = 0, cm_name = 0, cm_sig = 0,
                cm_size = 0, cp_size = 0, cp_holder = 0, cp_source = 0, klass_name = 0,
                sym_length = 0, sym_body = 0;
};

namespace {

bool read_mem(std::uint32_t pid, std::uint64_t addr, void* out, std::size_t len) {
  return read_process_memory(pid, addr, out, len);
}

template <typename T>
T rd(std::uint32_t pid, std::uint64_t addr, bool* ok) {
  T v{};
  if (!read_mem(pid, addr, &v, sizeof(v))) *ok = false;
  return v;
}

std::string read_cstr(std::uint32_t pid, std::uint64_t addr) {
  char buf[128];
  if (!addr || !read_mem(pid, addr, buf, sizeof(buf))) {
    // Near the end of a mapping: byte by byte would be slow; try a shorter read.
    if (!addr || !read_mem(pid, addr, buf, 32)) return {};
    buf[31] = '\0';
  }
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

// The gHotSpot* globals of libjvm's .dynsym, link-time addresses.
std::map<std::string, std::uint64_t> vmstructs_symbols(const std::string& path) {
  const auto syms = elf_symbol_values(path, {"gHotSpotVM"});
  return {syms.address.begin(), syms.address.end()};
}

constexpr const char* kNotYet = "its tables are not made yet";

struct Table {
  std::map<std::string, std::uint64_t> fields;  // "Type::field" -> offset, or address (static)
  std::map<std::string, std::uint64_t> sizes;   // type -> size
};

// Reads the VMStructs and VMTypes arrays of the JVM `pid` (libjvm loaded at `bias`).
Result<Table> read_tables(std::uint32_t pid, const std::map<std::string, std::uint64_t>& syms,
                          std::uint64_t bias) {
  bool ok = true;
  auto g = [&](const char* n) -> std::uint64_t {
    auto it = syms.find(n);
    if (it == syms.end()) {
      ok = false;
      return 0;
    }
    return rd<std::uint64_t>(pid, bias + it->second, &ok);
  };
  Table t;
  const std::uint64_t structs = g("gHotSpotVMStructs"),
                      stride = g("gHotSpotVMStructEntryArrayStride"),
                      type_off = g("gHotSpotVMStructEntryTypeNameOffset"),
                      field_off = g("gHotSpotVMStructEntryFieldNameOffset"),
                      offset_off = g("gHotSpotVMStructEntryOffsetOffset"),
                      addr_off = g("gHotSpotVMStructEntryAddressOffset"),
                      static_off = g("gHotSpotVMStructEntryIsStaticOffset");
  const std::uint64_t types = g("gHotSpotVMTypes"), tstride = g("gHotSpotVMTypeEntryArrayStride"),
                      tname_off = g("gHotSpotVMTypeEntryTypeNameOffset"),
                      tsize_off = g("gHotSpotVMTypeEntrySizeOffset");
  // Zero until libjvm's initialisers ran: a JVM in its first milliseconds.
  if (!ok || !structs || !types || !stride || !tstride) return make_error(kNotYet);
  // The target's memory is not trusted: bounded strides, offsets and entry counts.
  if (stride < 16 || stride > 256 || tstride < 16 || tstride > 256 ||
      std::max({type_off, field_off, offset_off, addr_off, static_off}) + 8 > stride ||
      std::max(tname_off, tsize_off) + 8 > tstride)
    return make_error("gHotSpotVMStructs entries of an unexpected shape");
  std::vector<std::uint8_t> e(stride);
  for (std::uint64_t i = 0; i < (1u << 17); ++i) {
    if (!read_mem(pid, structs + i * stride, e.data(), stride))
      return make_error("gHotSpotVMStructs unreadable");
    std::uint64_t tn, fn, off, addr;
    std::int32_t is_static;
    std::memcpy(&tn, &e[type_off], 8);
    if (!tn) break;
    std::memcpy(&fn, &e[field_off], 8);
    std::memcpy(&off, &e[offset_off], 8);
    std::memcpy(&addr, &e[addr_off], 8);
    std::memcpy(&is_static, &e[static_off], 4);
    t.fields[read_cstr(pid, tn) + "::" + read_cstr(pid, fn)] = is_static ? addr : off;
  }
  std::vector<std::uint8_t> te(tstride);
  for (std::uint64_t i = 0; i < (1u << 17); ++i) {
    if (!read_mem(pid, types + i * tstride, te.data(), tstride))
      return make_error("gHotSpotVMTypes unreadable");
    std::uint64_t tn, size;
    std::memcpy(&tn, &te[tname_off], 8);
    if (!tn) break;
    std::memcpy(&size, &te[tsize_off], 8);
    t.sizes[read_cstr(pid, tn)] = size;
  }
  return t;
}

// HotSpot's UNSIGNED5 (Pack200) stream; JDK 20+ excludes the zero byte (every byte is
// biased by one).
struct Unsigned5 {
  const std::vector<std::uint8_t>& b;
  std::size_t pos;
  std::uint32_t x;  // the bias: 1 from JDK 20
  bool bad = false;
  std::uint32_t next() {
    const std::uint32_t L = 192 - x;
    std::uint32_t sum = 0, shift = 0;
    for (int i = 0; i < 5; ++i) {
      if (pos >= b.size()) {
        bad = true;
        return 0;
      }
      const std::uint32_t v = b[pos++] - x;
      sum += v << shift;
      if (v < L) return sum;
      shift += 6;
    }
    return sum;
  }
  std::int32_t next_signed() {
    const std::uint32_t v = next();
    return static_cast<std::int32_t>((v >> 1) ^ (0u - (v & 1)));
  }
};

}  // namespace

struct HotSpotFrames::Jvm {
  std::uint32_t pid = 0;
  std::shared_ptr<const HotSpotLayout> layout;
  std::uint64_t code_low = 0;
  loupe_hotspot_proc entry{};
  // Exited (or its maps read without libjvm: a zombie's read empty before its exit is
  // told): its entry is gone, its names stay for the stacks that hold them.
  bool gone = false;
  std::map<std::uint64_t, std::unique_ptr<Method>> methods;  // by Method*
  std::map<std::uint64_t, std::uint64_t> method_tokens;      // Method* -> ConstMethod*
  // By (code begin, compile id): code freed and reused holds several generations, and a
  // frame names the one whose compile id it recorded.
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::unique_ptr<NMethod>> nmethods;
};

std::uint32_t HotSpotFrames::Method::line_at(std::uint32_t bci) const {
  std::uint32_t line = 0;
  for (const auto& [b, l] : lines) {
    if (b > bci) break;
    line = l;
  }
  return line;
}

HotSpotFrames::HotSpotFrames(std::string proc_root, bool perf_maps)
    : proc_root_(std::move(proc_root)) {
  perf_maps_.enable(perf_maps);
}
HotSpotFrames::~HotSpotFrames() = default;

std::vector<RuntimeMapSpec> HotSpotFrames::maps() const {
  return {{"loupe_hotspot_procs", BPF_MAP_TYPE_HASH, 4, sizeof(loupe_hotspot_proc), 256,
           BPF_F_NO_PREALLOC}};
}

Status HotSpotFrames::attach(const std::map<std::string, int>& fds) {
  auto it = fds.find("loupe_hotspot_procs");
  if (it == fds.end()) return make_error("no loupe_hotspot_procs map");
  procs_fd_ = it->second;
  return {};
}

namespace {

Result<std::shared_ptr<HotSpotLayout>> make_layout(std::uint32_t pid, const std::string& libjvm,
                                                   std::uint64_t bias) {
  auto syms = vmstructs_symbols(libjvm);
  auto t = read_tables(pid, syms, bias);
  if (!t) return make_error(t.error());
  auto L = std::make_shared<HotSpotLayout>();
  L->libjvm = libjvm;
  L->bias = bias;
  std::string missing;
  auto f = [&](const char* name, std::uint32_t* out, bool required = true) {
    auto it = t->fields.find(name);
    if (it == t->fields.end() || it->second > (1u << 16)) {
      if (required) missing += std::string(missing.empty() ? "" : ", ") + name;
      return false;
    }
    *out = static_cast<std::uint32_t>(it->second);
    return true;
  };
  auto st = [&](const char* name, std::uint64_t* out) {
    auto it = t->fields.find(name);
    if (it == t->fields.end()) {
      missing += std::string(missing.empty() ? "" : ", ") + name;
      return;
    }
    *out = it->second;
  };
  auto size = [&](const char* type, std::uint32_t* out) {
    auto it = t->sizes.find(type);
    if (it == t->sizes.end() || it->second > (1u << 16)) {
      missing += std::string(missing.empty() ? "" : ", ") + "sizeof(" + type + ")";
      return;
    }
    *out = static_cast<std::uint32_t>(it->second);
  };
  std::uint64_t major_addr = 0;
  st("Abstract_VM_Version::_vm_major_version", &major_addr);
  st("CodeCache::_heaps", &L->heaps);
  st("CodeCache::_low_bound", &L->low_bound);
  st("CodeCache::_high_bound", &L->high_bound);
  st("AbstractInterpreter::_code", &L->interp_code);
  f("GrowableArrayBase::_len", &L->ga_len);
  f("GrowableArray<int>::_data", &L->ga_data);
  f("CodeHeap::_memory", &L->heap_memory);
  f("CodeHeap::_segmap", &L->heap_segmap);
  f("CodeHeap::_log2_segment_size", &L->heap_log2);
  f("VirtualSpace::_low_boundary", &L->vs_low);
  f("VirtualSpace::_high_boundary", &L->vs_high);
  size("HeapBlock", &L->heap_block);
  f("StubQueue::_stub_buffer", &L->sq_buffer);
  f("StubQueue::_buffer_limit", &L->sq_limit);
  auto& w = L->walk;
  std::uint32_t v = 0;
  f("CodeBlob::_name", &v), w.blob_name = static_cast<std::uint16_t>(v);
  f("CodeBlob::_frame_complete_offset", &v), w.blob_frame_complete = static_cast<std::uint16_t>(v);
  f("CodeBlob::_frame_size", &v), w.blob_frame_size = static_cast<std::uint16_t>(v);
  if (f("CodeBlob::_code_offset", &L->blob_code, false)) {
    // JDK 23+: offsets from the blob, not pointers.
    w.flags |= LOUPE_HOTSPOT_CODE_OFFSETS;
    f("CodeBlob::_data_offset", &L->blob_data);
  } else {
    f("CodeBlob::_code_begin", &L->blob_code);
    f("CodeBlob::_code_end", &L->blob_data);
  }
  w.blob_code_begin = static_cast<std::uint16_t>(L->blob_code);
  w.blob_code_end = static_cast<std::uint16_t>(L->blob_data);
  if (f("CodeBlob::_kind", &v, false)) w.flags |= LOUPE_HOTSPOT_COMPLETE_16;  // JDK 25's int16
  f("nmethod::_compile_id", &L->nm_compile_id);
  w.nmethod_compile_id = static_cast<std::uint16_t>(L->nm_compile_id);
  f("Method::_constMethod", &v), w.method_const = static_cast<std::uint16_t>(v);
  size("ConstMethod", &L->cm_size);
  w.const_method_size = static_cast<std::uint16_t>(L->cm_size);
  w.interp_method_slot = -3;
  w.interp_bcp_slot = -8;
  w.interp_sender_sp_slot = -1;
  // Debug info.
  if (f("nmethod::_immutable_data", &L->nm_imm, false)) {
    L->immutable = true;
    f("nmethod::_method", &L->nm_method);
    f("nmethod::_immutable_data_size", &L->nm_imm_size);
    f("nmethod::_scopes_pcs_offset", &L->nm_pcs);
    f("nmethod::_scopes_data_offset", &L->nm_scopes_data);
    f("CodeBlob::_mutable_data", &L->blob_mut);
    f("CodeBlob::_mutable_data_size", &L->blob_mut_size);
    f("CodeBlob::_relocation_size", &L->blob_reloc_size);
  } else {
    f("CompiledMethod::_method", &L->nm_method);
    f("CompiledMethod::_scopes_data_begin", &L->cm_scopes_data);
    f("nmethod::_scopes_pcs_offset", &L->nm_pcs);
    f("nmethod::_dependencies_offset", &L->nm_deps);
    f("nmethod::_metadata_offset", &L->nm_metadata);
  }
  f("ConstMethod::_constants", &L->cm_constants);
  if (!f("ConstMethod::_flags._flags", &L->cm_flags, false)) f("ConstMethod::_flags", &L->cm_flags);
  f("ConstMethod::_code_size", &L->cm_code_size);
  f("ConstMethod::_name_index", &L->cm_name);
  f("ConstMethod::_signature_index", &L->cm_sig);
  size("ConstantPool", &L->cp_size);
  f("ConstantPool::_pool_holder", &L->cp_holder);
  f("ConstantPool::_source_file_name_index", &L->cp_source);
  f("Klass::_name", &L->klass_name);
  f("Symbol::_length", &L->sym_length);
  f("Symbol::_body", &L->sym_body);
  if (!missing.empty()) return make_error("its VMStructs lack " + missing);
  bool ok = true;
  L->major = rd<std::int32_t>(pid, major_addr, &ok);
  if (!ok || L->major < 9 || L->major > 99) return make_error("no readable VM version");
  return L;
}

std::string symbol_text(std::uint32_t pid, const HotSpotLayout& L, std::uint64_t sym) {
  bool ok = true;
  const auto len = rd<std::uint16_t>(pid, sym + L.sym_length, &ok);
  if (!ok || !sym) return {};
  std::string s(len, '\0');
  if (len && !read_mem(pid, sym + L.sym_body, s.data(), len)) return {};
  return s;
}

}  // namespace

HotSpotFrames::Jvm* HotSpotFrames::jvm(std::uint32_t pid) {
  auto it = jvms_.find(pid);
  return it == jvms_.end() ? nullptr : it->second.get();
}

Runtime::Update HotSpotFrames::update(std::uint32_t pid, const std::vector<MapsEntry>& maps) {
  const MapsEntry* lib = nullptr;
  for (const auto& m : maps)
    if (m.offset == 0 && m.path.size() > 10 &&
        m.path.compare(m.path.size() - 10, 10, "/libjvm.so") == 0) {
      lib = &m;
      break;
    }
  // The perf map fallback learns its JVMs from the same one read of the maps.
  lib ? perf_maps_.found(static_cast<pid_t>(pid)) : perf_maps_.lost(static_cast<pid_t>(pid));
  if (procs_fd_ < 0) return Update::kNo;
  std::unique_lock lock(mu_);
  if (!lib) {
    if (Jvm* j = jvm(pid); j && !j->gone) {
      bpf_map_delete_elem(procs_fd_, &pid);
      j->gone = true;
    }
    return Update::kNo;
  }
  const std::string libjvm = lib->path;
  const std::uint64_t bias = lib->start;
  if (Jvm* j = jvm(pid); j && !j->gone && j->layout->libjvm == libjvm && j->code_low)
    return Update::kYes;
  lock.unlock();
  // Each JVM's own tables: the statics' addresses are its own (libjvm loads anywhere).
  auto layout = make_layout(pid, libjvm, bias);
  if (!layout && layout.error() == kNotYet) return Update::kLater;
  if (!layout) {
    lock.lock();
    if (unsupported_.insert(libjvm + ": " + layout.error()).second)
      spdlog::warn(
          "pid {} runs {}, whose frames loupe cannot read ({}): its Java frames stay "
          "unnamed",
          pid, libjvm, layout.error());
    return Update::kNo;
  }
  const HotSpotLayout& L = **layout;
  bool ok = true;
  loupe_hotspot_proc e = L.walk;
  e.code_low = rd<std::uint64_t>(pid, L.low_bound, &ok);
  e.code_high = rd<std::uint64_t>(pid, L.high_bound, &ok);
  const auto heaps = rd<std::uint64_t>(pid, L.heaps, &ok);
  if (!ok || !heaps || !e.code_low || e.code_high <= e.code_low) return Update::kLater;
  const auto n = rd<std::int32_t>(pid, heaps + L.ga_len, &ok);
  const auto data = rd<std::uint64_t>(pid, heaps + L.ga_data, &ok);
  if (!ok || n <= 0) return Update::kLater;
  for (std::int32_t i = 0; i < n && i < LOUPE_HOTSPOT_MAX_HEAPS; ++i) {
    const auto heap = rd<std::uint64_t>(pid, data + 8 * static_cast<std::uint64_t>(i), &ok);
    auto& h = e.heaps[e.n_heaps];
    h.low = rd<std::uint64_t>(pid, heap + L.heap_memory + L.vs_low, &ok);
    h.high = rd<std::uint64_t>(pid, heap + L.heap_memory + L.vs_high, &ok);
    h.segmap = rd<std::uint64_t>(pid, heap + L.heap_segmap + L.vs_low, &ok);
    const auto log2 = rd<std::int32_t>(pid, heap + L.heap_log2, &ok);
    if (!ok || log2 < 4 || log2 > 16) return Update::kLater;
    e.segment_shift = static_cast<std::uint16_t>(log2);
    ++e.n_heaps;
  }
  e.heap_block_size = static_cast<std::uint16_t>(L.heap_block);
  const auto queue = rd<std::uint64_t>(pid, L.interp_code, &ok);
  if (ok && queue) {
    e.interp_low = rd<std::uint64_t>(pid, queue + L.sq_buffer, &ok);
    e.interp_high =
        e.interp_low + static_cast<std::uint32_t>(rd<std::int32_t>(pid, queue + L.sq_limit, &ok));
  }
  if (!ok || !e.interp_low) return Update::kLater;  // the interpreter is made at startup
  lock.lock();
  if (bpf_map_update_elem(procs_fd_, &pid, &e, BPF_ANY) != 0) {
    ++write_errors_;
    return Update::kNo;
  }
  auto& j = jvms_[pid];
  if (!j || j->gone) {  // a new JVM (a pid reused after one exited starts afresh)
    j = std::make_unique<Jvm>();
    j->pid = pid;
    ++jvms_seen_;
    spdlog::debug("pid {}: HotSpot {} ({}), Java frames on", pid, L.major, libjvm);
  }
  j->layout = *layout;
  j->code_low = e.code_low;
  j->entry = e;
  return Update::kYes;
}

void HotSpotFrames::forget(std::uint32_t pid) {
  std::lock_guard lock(mu_);
  // The names stay: stacks of an exited JVM are named at the next report. Its entry goes.
  Jvm* j = jvm(pid);
  if (!j || j->gone) return;
  if (procs_fd_ >= 0) bpf_map_delete_elem(procs_fd_, &pid);
  j->gone = true;
}

bool HotSpotFrames::entry(std::uint32_t pid, loupe_hotspot_proc* out) const {
  std::lock_guard lock(mu_);
  auto it = jvms_.find(pid);
  if (it == jvms_.end()) return false;
  *out = it->second->entry;
  return true;
}

const HotSpotFrames::Method* HotSpotFrames::read_method(Jvm& j, std::uint64_t m,
                                                        std::uint64_t token, bool check) {
  const HotSpotLayout& L = *j.layout;
  const std::uint32_t pid = j.pid;
  bool ok = true;
  const auto cm = rd<std::uint64_t>(pid, m + L.walk.method_const, &ok);
  if (!ok || !cm || (check && cm != token)) {
    ok ? ++stale_ : ++read_failed_;
    return nullptr;
  }
  if (auto it = j.methods.find(m); it != j.methods.end() && j.method_tokens[m] == cm)
    return it->second.get();
  const auto cp = rd<std::uint64_t>(pid, cm + L.cm_constants, &ok);
  const auto holder = rd<std::uint64_t>(pid, cp + L.cp_holder, &ok);
  const auto klass_sym = rd<std::uint64_t>(pid, holder + L.klass_name, &ok);
  const auto name_idx = rd<std::uint16_t>(pid, cm + L.cm_name, &ok);
  const auto src_idx = rd<std::uint16_t>(pid, cp + L.cp_source, &ok);
  const auto flags = rd<std::uint32_t>(pid, cm + L.cm_flags, &ok);
  const auto code_size = rd<std::uint16_t>(pid, cm + L.cm_code_size, &ok);
  const auto name_sym = rd<std::uint64_t>(pid, cp + L.cp_size + 8ull * name_idx, &ok);
  if (!ok) {
    ++read_failed_;
    return nullptr;
  }
  auto out = std::make_unique<Method>();
  std::string klass = symbol_text(pid, L, klass_sym);
  std::replace(klass.begin(), klass.end(), '/', '.');
  // Hidden classes (lambdas) carry their address: one name for all of them.
  if (auto plus = klass.find("+0x"); plus != std::string::npos)
    klass = klass.substr(0, plus) + "+<hidden>";
  out->name = klass + "." + symbol_text(pid, L, name_sym & ~1ull);
  if (src_idx) {
    const auto src = rd<std::uint64_t>(pid, cp + L.cp_size + 8ull * src_idx, &ok);
    if (ok) out->file = symbol_text(pid, L, src & ~1ull);
  }
  // The compressed line number table follows the bytecodes (ConstMethod flag bit 0).
  if (flags & 1) {
    std::vector<std::uint8_t> b(4096);
    const std::uint64_t at = cm + L.cm_size + code_size;
    std::size_t got = 0;
    for (; got < b.size(); got += 256)
      if (!read_mem(pid, at + got, b.data() + got, 256)) break;
    b.resize(got);
    Unsigned5 s{b, 0, L.major >= 20 ? 1u : 0u};
    std::uint32_t bci = 0, line = 0;
    for (int i = 0; i < 65536 && s.pos < b.size(); ++i) {
      const std::uint8_t c = b[s.pos++];
      if (c == 0) break;
      if (c == 0xff) {
        bci += static_cast<std::uint32_t>(s.next_signed());
        line += static_cast<std::uint32_t>(s.next_signed());
      } else {
        bci += c >> 3;
        line += c & 7;
      }
      if (s.bad) break;
      out->lines.emplace_back(bci, line);
    }
    std::sort(out->lines.begin(), out->lines.end());
  }
  ++methods_read_;
  j.method_tokens[m] = cm;
  return (j.methods[m] = std::move(out)).get();
}

const HotSpotFrames::NMethod* HotSpotFrames::read_nmethod_locked(Jvm& j, std::uint64_t blob,
                                                                 std::uint32_t compile_id) {
  const HotSpotLayout& L = *j.layout;
  const std::uint32_t pid = j.pid;
  bool ok = true;
  const auto id = rd<std::int32_t>(pid, blob + L.nm_compile_id, &ok);
  if (compile_id == kAnyCompileId) compile_id = static_cast<std::uint32_t>(id);
  if (!ok || (static_cast<std::uint32_t>(id) & 0x1ffffff) != (compile_id & 0x1ffffff)) {
    ok ? ++stale_ : ++read_failed_;
    return nullptr;
  }
  auto nm = std::make_unique<NMethod>();
  nm->compile_id = static_cast<std::uint32_t>(id);
  if (L.walk.flags & LOUPE_HOTSPOT_CODE_OFFSETS) {
    nm->code_begin =
        blob + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.blob_code, &ok));
    nm->code_end =
        blob + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.blob_data, &ok));
  } else {
    nm->code_begin = rd<std::uint64_t>(pid, blob + L.blob_code, &ok);
    nm->code_end = rd<std::uint64_t>(pid, blob + L.blob_data, &ok);
  }
  const auto method = rd<std::uint64_t>(pid, blob + L.nm_method, &ok);
  // Where the debug info is: the PcDescs, the scopes' stream, the metadata (Method*s).
  std::uint64_t pcs = 0, pcs_end = 0, scopes = 0, scopes_end = 0, meta = 0, meta_end = 0;
  if (L.immutable) {
    const auto imm = rd<std::uint64_t>(pid, blob + L.nm_imm, &ok);
    const auto imm_size = rd<std::int32_t>(pid, blob + L.nm_imm_size, &ok);
    pcs = imm + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.nm_pcs, &ok));
    scopes = imm + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.nm_scopes_data, &ok));
    pcs_end = scopes;
    scopes_end = imm + static_cast<std::uint32_t>(imm_size);
    const auto mut = rd<std::uint64_t>(pid, blob + L.blob_mut, &ok);
    meta = mut + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.blob_reloc_size, &ok));
    meta_end = mut + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.blob_mut_size, &ok));
  } else {
    pcs = blob + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.nm_pcs, &ok));
    pcs_end = blob + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.nm_deps, &ok));
    scopes = rd<std::uint64_t>(pid, blob + L.cm_scopes_data, &ok);
    scopes_end = pcs;
    meta = blob + static_cast<std::uint32_t>(rd<std::int32_t>(pid, blob + L.nm_metadata, &ok));
    meta_end = scopes;
  }
  constexpr std::uint64_t kMax = 1 << 20;
  if (!ok || pcs_end < pcs || pcs_end - pcs > kMax || scopes_end < scopes ||
      scopes_end - scopes > kMax || meta_end < meta || meta_end - meta > kMax) {
    ++read_failed_;
    return nullptr;
  }
  std::vector<std::uint8_t> pc_bytes(pcs_end - pcs), scope_bytes(scopes_end - scopes);
  std::vector<std::uint64_t> metadata((meta_end - meta) / 8);
  if ((!pc_bytes.empty() && !read_mem(pid, pcs, pc_bytes.data(), pc_bytes.size())) ||
      (!scope_bytes.empty() && !read_mem(pid, scopes, scope_bytes.data(), scope_bytes.size())) ||
      (!metadata.empty() && !read_mem(pid, meta, metadata.data(), metadata.size() * 8))) {
    ++read_failed_;
    return nullptr;
  }
  nm->method = method ? read_method(j, method, 0, false) : nullptr;
  const std::uint32_t x = L.major >= 20 ? 1u : 0u;
  for (std::size_t at = 0; at + 16 <= pc_bytes.size(); at += 16) {
    std::int32_t pc_off, decode;
    std::memcpy(&pc_off, &pc_bytes[at], 4);
    std::memcpy(&decode, &pc_bytes[at + 4], 4);
    if (pc_off < 0) continue;
    std::vector<Scope> chain;
    // Innermost scope first; each names the one it was inlined into (0: none). Offsets
    // strictly decrease, so a corrupt stream cannot loop.
    std::int64_t prev = INT64_MAX;
    while (decode > 0 && decode < prev && static_cast<std::size_t>(decode) < scope_bytes.size() &&
           chain.size() < 64) {
      Unsigned5 s{scope_bytes, static_cast<std::size_t>(decode), x};
      const std::uint32_t sender = s.next();
      const std::uint32_t midx = s.next();
      const std::int64_t bci = static_cast<std::int64_t>(s.next()) - 1;
      if (s.bad || midx == 0 || midx > metadata.size()) break;
      const Method* mm = read_method(j, metadata[midx - 1], 0, false);
      if (mm) chain.push_back({mm, bci < 0 ? 0u : static_cast<std::uint32_t>(bci)});
      prev = decode;
      decode = static_cast<std::int32_t>(sender);
    }
    nm->pcs.emplace_back(static_cast<std::uint32_t>(pc_off), std::move(chain));
  }
  std::sort(nm->pcs.begin(), nm->pcs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ++nmethods_read_;
  const std::pair<std::uint64_t, std::uint32_t> key{nm->code_begin, nm->compile_id & 0x1ffffff};
  return (j.nmethods[key] = std::move(nm)).get();
}

const HotSpotFrames::NMethod* HotSpotFrames::read_nmethod(std::uint32_t pid, std::uint64_t blob,
                                                          std::uint32_t compile_id) {
  std::lock_guard lock(mu_);
  Jvm* j = jvm(pid);
  return j ? read_nmethod_locked(*j, blob, compile_id) : nullptr;
}

std::vector<std::uint64_t> HotSpotFrames::nmethod_blobs(std::uint32_t pid) {
  std::lock_guard lock(mu_);
  std::vector<std::uint64_t> out;
  Jvm* j = jvm(pid);
  if (!j) return out;
  const loupe_hotspot_proc& e = j->entry;
  for (std::uint32_t h = 0; h < e.n_heaps && h < LOUPE_HOTSPOT_MAX_HEAPS; ++h) {
    const auto& heap = e.heaps[h];
    // Blocks follow one another: a header {length in segments, used} then the blob.
    for (std::uint64_t at = heap.low, steps = 0; at < heap.high && steps < (1u << 22); ++steps) {
      bool ok = true;
      // JDK 25's header packs the length in 32 bits (sizeof(HeapBlock) 8, 16 before).
      const bool narrow = e.heap_block_size == 8;
      const std::uint64_t length =
          narrow ? rd<std::uint32_t>(pid, at, &ok) : rd<std::uint64_t>(pid, at, &ok);
      const auto used = rd<std::uint8_t>(pid, at + (narrow ? 4 : 8), &ok);
      if (!ok || length == 0) break;
      const std::uint64_t blob = at + e.heap_block_size;
      const auto name = rd<std::uint64_t>(pid, blob + e.blob_name, &ok);
      char text[8] = {};
      if (ok && used && name && read_mem(pid, name, text, 7) &&
          std::strncmp(text, "nmethod", 7) == 0)
        out.push_back(blob);
      at += length << e.segment_shift;
    }
  }
  return out;
}

void HotSpotFrames::seen(const loupe_runtime_seen_key& key) {
  std::lock_guard lock(mu_);
  Jvm* j = jvm(key.tgid);
  if (!j) return;
  if (key.kind == LOUPE_HOTSPOT_SEEN_METHOD) {
    read_method(*j, key.ptr, key.token, true);
  } else if (key.kind == LOUPE_HOTSPOT_SEEN_NMETHOD) {
    read_nmethod_locked(*j, key.ptr, static_cast<std::uint32_t>(key.token));
  }
}

std::uint32_t HotSpotFrames::name(std::uint32_t pid, std::uint64_t frame,
                                  Symbolizer::RuntimeName* out, std::uint32_t max) {
  const std::uint64_t p = LOUPE_RUNTIME_PAYLOAD(frame);
  std::lock_guard lock(mu_);
  Jvm* j = jvm(pid);
  if (!j || max == 0) {
    ++unnamed_;
    return 0;
  }
  auto put = [&](std::uint32_t i, const Method& m, std::uint32_t bci, bool known) {
    out[i].function = m.name;
    out[i].file = m.file;
    out[i].line = known ? m.line_at(bci) : 0;
    out[i].kind = LOUPE_FRAME_JAVA;
    out[i].resolution = LOUPE_RESOLVED_RUNTIME;
  };
  switch (LOUPE_HOTSPOT_KIND(p)) {
    case LOUPE_HOTSPOT_INTERPRETED: {
      const std::uint64_t m = LOUPE_HOTSPOT_METHOD(p);
      auto it = j->methods.find(m);
      const Method* mm = it != j->methods.end() ? it->second.get() : read_method(*j, m, 0, false);
      if (!mm) break;
      const auto bci = static_cast<std::uint32_t>(LOUPE_HOTSPOT_BCI(p));
      put(0, *mm, bci, bci != LOUPE_HOTSPOT_BCI_UNKNOWN);
      return 1;
    }
    case LOUPE_HOTSPOT_COMPILED: {
      const std::uint64_t pc = j->code_low + LOUPE_HOTSPOT_PC_OFF(p);
      const auto id = static_cast<std::uint32_t>(LOUPE_HOTSPOT_COMPILE_ID(p));
      // The nmethods that begin at or below pc, nearest first: the one with the frame's
      // compile id whose code holds pc (a few generations of reused code at most).
      const NMethod* found = nullptr;
      auto it = j->nmethods.upper_bound({pc, UINT32_MAX});
      for (int step = 0; step < 256 && it != j->nmethods.begin() && !found; ++step) {
        --it;
        const NMethod& c = *it->second;
        if (pc < c.code_end && (c.compile_id & 0x1ffffff) == id) found = &c;
      }
      if (!found) {
        spdlog::trace("pid {}: pc {:#x} (compile id {}): no such nmethod read", pid, pc, id);
        break;
      }
      const NMethod& nm = *found;
      // HotSpot's sampler's rule: the first PcDesc past the pc (the walk took 1 off a
      // return address, whose call's PcDesc sits at it).
      const auto rel = static_cast<std::uint32_t>(pc - nm.code_begin) + 1;
      auto d = std::lower_bound(nm.pcs.begin(), nm.pcs.end(), rel,
                                [](const auto& a, std::uint32_t v) { return a.first < v; });
      if (d == nm.pcs.end() || d->second.empty()) {
        if (!nm.method) break;
        put(0, *nm.method, 0, false);
        return 1;
      }
      std::uint32_t n = 0;
      for (const auto& s : d->second) {
        if (n == max) break;
        put(n++, *s.method, s.bci, true);
      }
      return n;
    }
    default:
      out[0].function = "[jvm stub]";
      out[0].file.clear();
      out[0].line = 0;
      out[0].kind = LOUPE_FRAME_JAVA;
      out[0].resolution = LOUPE_RESOLVED_RUNTIME;
      return 1;
  }
  ++unnamed_;
  return 0;
}

void HotSpotFrames::report_health(HealthReport& health) const {
  perf_maps_.report_health(health);
  std::lock_guard lock(mu_);
  if (!jvms_seen_ && unsupported_.empty()) return;
  const std::string comp = "hotspot_frames";
  const auto warn_if = [](std::uint64_t v) { return v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK; };
  health.health("hotspot_processes", comp, jvms_seen_, LOUPE_HEALTH_OK,
                fmt::format("HotSpot JVMs whose Java frames were walked from the VM's own "
                            "structures (no attach); {} method(s) and {} compiled method(s) read",
                            methods_read_, nmethods_read_),
                true);
  health.health("hotspot_unreadable", comp, read_failed_ + stale_, warn_if(read_failed_ + stale_),
                read_failed_ + stale_
                    ? fmt::format("methods or compiled methods the stacks met that could not be "
                                  "read ({} unreadable: the JVM was gone; {} freed and reused "
                                  "before they were read)",
                                  read_failed_, stale_)
                    : "",
                true,
                {methods_read_ + nmethods_read_ + read_failed_ + stale_, "methods",
                 LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("hotspot_frames_unnamed", comp, unnamed_, warn_if(unnamed_),
                unnamed_ ? "Java frames named by their tag only: what they referred to was not "
                           "read while the JVM lived"
                         : "",
                true, {0, nullptr, LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("hotspot_entries_refused", comp, write_errors_, warn_if(write_errors_),
                write_errors_ ? "JVMs the kernel's map refused (it holds 256): their Java frames "
                                "are unwound as JIT code by frame pointers"
                              : "",
                true);
  std::string why;
  for (const auto& u : unsupported_) why += (why.empty() ? "" : "; ") + u;
  health.health("hotspot_unsupported", comp, unsupported_.size(), warn_if(unsupported_.size()),
                why.empty() ? "" : "JVMs whose structures loupe cannot read: " + why, true);
}

}  // namespace loupe
