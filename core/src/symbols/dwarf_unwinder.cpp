// SPDX-License-Identifier: Apache-2.0
#include "symbols/dwarf_unwinder.hpp"

#include <elf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include "symbols/elf_file_cache.hpp"
#include "symbols/process_space.hpp"

#ifdef LOUPE_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#endif

namespace loupe {

#if defined(LOUPE_HAVE_LIBDW) && defined(__x86_64__)
namespace {

// x86-64 DWARF registers 0-16 (rax..r15, rip as the return-address column).
constexpr unsigned kX86Regs = 17;
constexpr unsigned kX86Sp = 7;
constexpr unsigned kX86Ip = 16;
// A read this far past the copied slice is still the stack going on (the slice was too
// short); further away, or below sp, the unwinder is following a garbage value.
constexpr std::uint64_t kExhaustedWindow = 8 << 20;

enum class MemoryFault { kNone, kExhausted, kBad };

// Separate debug files are never searched on the unwinding path: .eh_frame is in every
// mapped file, and a lookup (build-id paths, debuginfod) would cost far more than a sample.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word,
                 char**) {
  return -1;
}
int no_elf(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, Elf**) {
  return -1;
}

char* no_debuginfo_path = nullptr;

// The vdso image: every 64-bit process of this kernel maps the same one, so this process's
// copy (AT_SYSINFO_EHDR) stands for the target's. Written once to a memfd, because libdwfl
// reports modules from files; -1 when there is none.
int vdso_fd() {
  static const int fd = [] {
    const auto* ehdr = reinterpret_cast<const Elf64_Ehdr*>(getauxval(AT_SYSINFO_EHDR));
    if (!ehdr || std::memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0) return -1;
    // The section headers come last in the image.
    const std::size_t size = ehdr->e_shoff + std::size_t{ehdr->e_shnum} * ehdr->e_shentsize;
    if (size == 0 || size > (1u << 20)) return -1;
    int f = static_cast<int>(::syscall(SYS_memfd_create, "loupe-vdso", MFD_CLOEXEC));
    if (f < 0) return -1;
    if (::write(f, ehdr, size) != static_cast<ssize_t>(size)) {
      ::close(f);
      return -1;
    }
    return f;
  }();
  return fd;
}
const Dwfl_Callbacks kDwflCallbacks = {no_elf, no_debuginfo, dwfl_offline_section_address,
                                       &no_debuginfo_path};

}  // namespace

struct DwarfUnwinder::State {
  std::uint32_t pid;
  Dwfl* dwfl = nullptr;
  bool attached = false;
  std::set<std::tuple<std::string, std::uint64_t, std::uint32_t, std::uint32_t>> reported;
  std::size_t n_modules = 0;
  // The sample being unwound (valid during unwind()).
  Dwarf_Word regs[kX86Regs] = {};
  const std::uint8_t* stack = nullptr;
  std::uint64_t sp = 0;
  std::uint32_t stack_len = 0;
  std::uint64_t* out = nullptr;
  std::uint32_t max = 0;
  std::uint32_t n = 0;
  bool max_hit = false;
  bool pc_zero = false;
  MemoryFault fault = MemoryFault::kNone;
  std::uint64_t last_pc = 0;

  static pid_t next_thread(Dwfl*, void* arg, void** thread_argp) {
    if (*thread_argp) return 0;
    *thread_argp = arg;
    return static_cast<pid_t>(static_cast<State*>(arg)->pid);
  }
  static bool get_thread(Dwfl*, pid_t, void* arg, void** thread_argp) {
    *thread_argp = arg;
    return true;
  }
  static bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
    auto* s = static_cast<State*>(arg);
    if (addr >= s->sp && addr - s->sp <= s->stack_len && s->stack_len - (addr - s->sp) >= 8) {
      std::memcpy(result, s->stack + (addr - s->sp), sizeof(*result));
      return true;
    }
    MemoryFault f = addr >= s->sp && addr - s->sp < s->stack_len + kExhaustedWindow
                        ? MemoryFault::kExhausted
                        : MemoryFault::kBad;
    if (s->fault == MemoryFault::kNone) s->fault = f;
    return false;
  }
  static bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
    auto* s = static_cast<State*>(arg);
    if (!dwfl_thread_state_registers(thread, 0, kX86Regs, s->regs)) return false;
    dwfl_thread_state_register_pc(thread, s->regs[kX86Ip]);
    return true;
  }
  static int frame(Dwfl_Frame* frame, void* arg) {
    auto* s = static_cast<State*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
    if (pc == 0) {  // a zeroed return address ends some hand-written entry points
      s->pc_zero = true;
      return DWARF_CB_ABORT;
    }
    if (s->n >= s->max) {
      s->max_hit = true;
      return DWARF_CB_ABORT;
    }
    s->out[s->n++] = pc;
    s->last_pc = pc;
    return DWARF_CB_OK;
  }
};

namespace {
const Dwfl_Thread_Callbacks kThreadCallbacks = {DwarfUnwinder::State::next_thread,
                                                DwarfUnwinder::State::get_thread,
                                                DwarfUnwinder::State::memory_read,
                                                DwarfUnwinder::State::set_initial_registers,
                                                nullptr,
                                                nullptr};
}  // namespace

DwarfUnwinder::DwarfUnwinder(std::uint32_t pid) : s_(std::make_unique<State>()) {
  s_->pid = pid;
  s_->dwfl = dwfl_begin(&kDwflCallbacks);
}

DwarfUnwinder::~DwarfUnwinder() {
  if (s_->dwfl) dwfl_end(s_->dwfl);
}

void DwarfUnwinder::sync_modules(ProcessSpace& space, ElfFileCache& files) {
  synced_generation_ = space.generation();
  if (!s_->dwfl) return;
  bool began = false;
  for (MappedRegion& r : space.regions()) {
    if (r.map.path == "[vdso]") {
      // A sample in clock_gettime() & co.: the vdso's CFI carries the walk on to its caller.
      auto key = std::make_tuple(r.map.path, r.map.start, 0u, 0u);
      if (s_->reported.count(key) || vdso_fd() < 0) continue;
      int fd = ::dup(vdso_fd());
      if (fd < 0) continue;
      if (!began) {
        dwfl_report_begin_add(s_->dwfl);
        began = true;
      }
      // The vdso is linked at 0: its load bias is where the process maps it.
      if (dwfl_report_elf(s_->dwfl, "[vdso]", "[vdso]", fd, r.map.start, true)) {
        s_->reported.insert(std::move(key));
        ++s_->n_modules;
      } else {
        ::close(fd);
      }
      continue;
    }
    if (!r.map.executable || !r.map.file_backed()) continue;
    auto key = std::make_tuple(r.map.path, r.map.inode, r.map.dev_major, r.map.dev_minor);
    if (s_->reported.count(key)) continue;
    if (!space.ensure_elf(r, files)) continue;  // retried at the next sync
    int fd = space.open_file(r);
    if (fd < 0) continue;
    if (!began) {
      dwfl_report_begin_add(s_->dwfl);
      began = true;
    }
    // add_p_vaddr: `base` is the load bias (runtime - link-time address) the symbolizer
    // computed from the same mapping.
    Dwfl_Module* m = dwfl_report_elf(s_->dwfl, r.map.path.c_str(), r.map.path.c_str(), fd, *r.bias,
                                     /*add_p_vaddr=*/true);
    if (!m) {
      ::close(fd);  // consumed only on success
      continue;
    }
    s_->reported.insert(std::move(key));
    ++s_->n_modules;
  }
  if (began) dwfl_report_end(s_->dwfl, nullptr, nullptr);
  // The architecture comes from the first module, so state is attached once one exists.
  if (!s_->attached && s_->n_modules > 0)
    s_->attached = dwfl_attach_state(s_->dwfl, nullptr, static_cast<pid_t>(s_->pid),
                                     &kThreadCallbacks, s_.get());
}

bool DwarfUnwinder::covers(std::uint64_t pc) const {
  return s_->dwfl && dwfl_addrmodule(s_->dwfl, pc) != nullptr;
}

std::size_t DwarfUnwinder::modules() const {
  return s_->n_modules;
}

UnwindResult DwarfUnwinder::unwind(const loupe_user_regs& regs, const void* stack,
                                   std::uint32_t stack_len, std::uint64_t* out, std::uint32_t max) {
  UnwindResult res;
  if (regs.arch != LOUPE_ARCH_X86_64) {
    res.status = LOUPE_UNWIND_UNSUPPORTED;
    return res;
  }
  State& s = *s_;
  const std::uint64_t ip = regs.regs[kX86Ip];
  if (max == 0) {
    res.status = LOUPE_UNWIND_MAX_DEPTH;
    return res;
  }
  if (!s.attached) {
    out[0] = ip;
    res.n = 1;
    res.status = s.n_modules == 0 ? LOUPE_UNWIND_NO_PROCESS : LOUPE_UNWIND_UNSUPPORTED;
    return res;
  }
  for (unsigned i = 0; i < kX86Regs; ++i) s.regs[i] = (regs.mask >> i) & 1 ? regs.regs[i] : 0;
  s.stack = static_cast<const std::uint8_t*>(stack);
  s.sp = regs.regs[kX86Sp];
  s.stack_len = stack ? stack_len : 0;
  s.out = out;
  s.max = max;
  s.n = 0;
  s.max_hit = s.pc_zero = false;
  s.fault = MemoryFault::kNone;
  s.last_pc = ip;
  int rc = dwfl_getthread_frames(s.dwfl, static_cast<pid_t>(s.pid), State::frame, &s);
  res.n = s.n;
  // libdwfl ends a walk without an error when the return address cannot be read (it
  // takes it as undefined, like the outermost frame's), so a read the slice could not
  // serve decides: the walk was cut, not finished.
  if (s.max_hit)
    res.status = LOUPE_UNWIND_MAX_DEPTH;
  else if ((rc == 0 || s.pc_zero) && s.fault == MemoryFault::kNone)
    res.status = LOUPE_UNWIND_OK;
  else if (!covers(s.last_pc))
    res.status = LOUPE_UNWIND_UNMAPPED_PC;
  else if (s.fault == MemoryFault::kExhausted)
    res.status = LOUPE_UNWIND_STACK_EXHAUSTED;
  else if (s.fault == MemoryFault::kBad)
    res.status = LOUPE_UNWIND_BAD_MEMORY;
  else
    res.status = LOUPE_UNWIND_NO_CFI;
  if (res.n == 0) {  // not even the pc (initial state refused): report the pc alone
    out[0] = ip;
    res.n = 1;
  }
  s.stack = nullptr;
  s.out = nullptr;
  return res;
}

#else  // no libdw or not x86-64: every unwind is unsupported

struct DwarfUnwinder::State {};
DwarfUnwinder::DwarfUnwinder(std::uint32_t) : s_(std::make_unique<State>()) {}
DwarfUnwinder::~DwarfUnwinder() = default;
void DwarfUnwinder::sync_modules(ProcessSpace& space, ElfFileCache&) {
  synced_generation_ = space.generation();
}
bool DwarfUnwinder::covers(std::uint64_t) const {
  return false;
}
std::size_t DwarfUnwinder::modules() const {
  return 0;
}
UnwindResult DwarfUnwinder::unwind(const loupe_user_regs&, const void*, std::uint32_t,
                                   std::uint64_t*, std::uint32_t) {
  UnwindResult res;
  res.status = LOUPE_UNWIND_UNSUPPORTED;
  return res;
}

#endif

}  // namespace loupe
