// SPDX-License-Identifier: Apache-2.0
#include "allocator_attacher.hpp"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "loupe/sdk/plugin.hpp"
#include "memalloc.h"
#include "memalloc.skel.h"

namespace loupe::memalloc {
namespace {

bpf_program* entry_prog(memalloc_bpf* s, const std::string& f) {
  auto& p = s->progs;
  if (f == "malloc") return p.ma_malloc;
  if (f == "calloc") return p.ma_calloc;
  if (f == "realloc") return p.ma_realloc;
  if (f == "posix_memalign") return p.ma_posix_memalign;
  if (f == "aligned_alloc") return p.ma_aligned_alloc;
  if (f == "memalign") return p.ma_memalign;
  if (f == "valloc") return p.ma_valloc;
  if (f == "pvalloc") return p.ma_pvalloc;
  if (f == "free") return p.ma_free;
  return nullptr;
}

// st_value of each defined function symbol in .dynsym / .symtab named in `names`; a
// missing name is absent from the result (libbpf then reports why it cannot attach).
std::map<std::string, std::uint64_t> symbol_addresses(const std::string& path,
                                                      const std::vector<std::string>& names) {
  std::map<std::string, std::uint64_t> out;
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  for (Elf_Scn* scn = elf ? elf_nextscn(elf, nullptr) : nullptr; scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    std::size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
    for (std::size_t i = 0; data && i < n; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF ||
          GELF_ST_TYPE(sym.st_info) != STT_FUNC)
        continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (name && std::find(names.begin(), names.end(), name) != names.end())
        out.emplace(name, sym.st_value);
    }
  }
  if (elf) elf_end(elf);
  ::close(fd);
  return out;
}

}  // namespace

const std::vector<std::string>& allocator_functions() {
  static const std::vector<std::string> kFuncs = {"malloc",         "calloc",        "realloc",
                                                  "posix_memalign", "aligned_alloc", "memalign",
                                                  "valloc",         "pvalloc",       "free"};
  return kFuncs;
}

std::string libc_of(int pid) {
  std::ifstream maps(pid ? "/proc/" + std::to_string(pid) + "/maps" : "/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    auto base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libc.so", 0) != 0 && base.rfind("libc-", 0) != 0) continue;
    // The path is in the process's mount namespace (a container): reach it through
    // its root, which names the same inode uprobes attach to.
    if (pid) {
      std::string via_root = "/proc/" + std::to_string(pid) + "/root" + path;
      if (::access(via_root.c_str(), R_OK) == 0) return via_root;
    }
    return path;
  }
  return {};
}

AllocatorAttacher::AllocatorAttacher(const sdk::Host& host, memalloc_bpf* skel, std::string binary,
                                     int pid)
    : host_(host), skel_(skel), binary_(std::move(binary)), pid_(pid) {}

bool AllocatorAttacher::attach_one(const std::string& func, std::string& why) {
  bpf_program* entry = entry_prog(skel_, func);
  if (!entry) {
    why = "not an allocator function this plugin knows";
    return false;
  }
  // The return half first: a return without its entry is counted and harmless, an entry
  // whose return was never attached would leave the thread's call pending.
  bool paired = func != "free";
  for (bool ret : {true, false}) {
    if (ret && !paired) continue;
    bpf_program* prog = ret ? skel_->progs.ma_alloc_exit : entry;
    LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret, .func_name = func.c_str());
    bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid_, binary_.c_str(), 0, &o);
    int err = link ? 0 : errno;
    std::string probe = func + (ret ? ":return" : ":entry");
    host_.adopt_link(link, prog, probe, err);
    if (!link) {
      why = binary_ + ": " + probe + ": " + std::strerror(err) + " (errno " + std::to_string(err) +
            ")";
      return false;
    }
  }
  return true;
}

std::vector<std::pair<std::string, std::string>> AllocatorAttacher::attach(
    const std::vector<std::string>& functions) {
  std::vector<std::pair<std::string, std::string>> skipped;
  // glibc's aligned_alloc is an alias of memalign (one address): two probes on one
  // address would trap twice per call and count one call under both names.
  auto addresses = symbol_addresses(binary_, functions);
  std::map<std::uint64_t, std::string> attached_at;
  for (const auto& f : functions) {
    std::string why;
    auto addr = addresses.find(f);
    if (addr != addresses.end()) {
      auto [it, fresh] = attached_at.emplace(addr->second, f);
      if (!fresh) {
        host_.debug("memalloc: " + f + " is an alias of " + it->second + ": traced as " +
                    it->second);
        continue;
      }
    }
    if (attach_one(f, why)) continue;
    if (f == "malloc" || f == "free")
      throw sdk::Error(LOUPE_ERR_KERNEL, "cannot trace " + f + "(): " + why);
    host_.warn("memalloc: skipping " + f + "(): " + why);
    skipped.emplace_back(f, why);
  }
  return skipped;
}

}  // namespace loupe::memalloc
