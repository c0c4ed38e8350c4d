// SPDX-License-Identifier: Apache-2.0
#include "symbols/kallsyms_table.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>

namespace loupe {
namespace {

// kallsyms has no sizes: a symbol runs to the next one. A frame this far past the last
// symbol before it is more likely outside any known text than inside a huge function.
constexpr std::uint64_t kMaxSymbolSpan = 1ull << 20;

// Among aliases at one address, prefer the global name, then the one with the fewest
// leading underscores (`do_nanosleep` over `__pfx_do_nanosleep`-style internals).
int alias_rank(char type, std::string_view name) {
  int underscores = 0;
  while (underscores < static_cast<int>(name.size()) && name[underscores] == '_') ++underscores;
  return (std::isupper(static_cast<unsigned char>(type)) ? 0 : 100) + underscores;
}

}  // namespace

bool KallsymsTable::contains(const std::string& path, std::string_view name) {
  std::ifstream in(path);
  std::string addr, type, sym;
  while (in >> addr >> type >> sym) {
    if (sym == name) return true;
    in.ignore(256, '\n');
  }
  return false;
}

KallsymsTable::KallsymsTable(const std::string& path, Kind kind) {
  const std::string_view types = kind == Kind::kText ? "TtWw" : "DdBbRr";
  std::ifstream in(path);
  if (!in) {
    empty_reason_ = "cannot read " + path;
    return;
  }
  struct Raw {
    std::uint64_t addr;
    std::uint32_t name;
    std::uint32_t module;
    int rank;
  };
  std::vector<Raw> raw;
  raw.reserve(1 << 17);
  names_.reserve(1 << 22);
  bool all_zero = true;
  const std::uint32_t kernel = intern_module("[kernel]");
  for (std::string line; std::getline(in, line);) {
    // "ffffffff81000000 T _stext" or "ffffffffc0025c1c t bpf_prog_x\t[bpf]"
    std::uint64_t addr = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), addr, 16);
    if (ec != std::errc() || p + 3 > line.data() + line.size()) continue;
    char type = p[1];
    if (types.find(type) == std::string_view::npos) continue;
    if (addr != 0) all_zero = false;
    std::string_view rest(p + 3, line.data() + line.size() - (p + 3));
    std::string_view name = rest.substr(0, rest.find_first_of(" \t"));
    std::uint32_t module = kernel;
    if (auto lb = rest.find('['); lb != std::string_view::npos) {
      auto rb = rest.find(']', lb);
      if (rb != std::string_view::npos) module = intern_module(rest.substr(lb, rb - lb + 1));
    }
    auto off = static_cast<std::uint32_t>(names_.size());
    names_.append(name);
    names_.push_back('\0');
    raw.push_back({addr, off, module, alias_rank(type, name)});
  }
  if (all_zero) {
    empty_reason_ = raw.empty() ? path + " holds no symbols of that kind"
                                : path + " shows zero addresses (kptr_restrict; run as root)";
    names_.clear();
    return;
  }
  std::stable_sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.rank < b.rank;
  });
  entries_.reserve(raw.size());
  for (const Raw& r : raw) {
    if (!entries_.empty() && entries_.back().addr == r.addr) continue;
    entries_.push_back({r.addr, r.name, r.module});
  }
  names_.shrink_to_fit();
}

std::uint32_t KallsymsTable::intern_module(std::string_view module) {
  for (const auto& [text, off] : modules_)
    if (text == module) return off;
  auto off = static_cast<std::uint32_t>(names_.size());
  names_.append(module);
  names_.push_back('\0');
  modules_.emplace_back(std::string(module), off);
  return off;
}

KernelSymbol KallsymsTable::lookup(std::uint64_t addr, bool* in_kernel) const {
  *in_kernel = false;
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](std::uint64_t a, const Entry& e) { return a < e.addr; });
  if (it == entries_.begin()) return {nullptr, nullptr, 0};
  const Entry& e = *(it - 1);
  std::uint64_t offset = addr - e.addr;
  if (offset >= kMaxSymbolSpan) return {nullptr, nullptr, 0};
  *in_kernel = true;
  return {names_.data() + e.name, names_.data() + e.module, offset};
}

}  // namespace loupe
