// SPDX-License-Identifier: Apache-2.0
#include "library_resolver.hpp"

#include "loupe/sdk/library.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace loupe::latency {
namespace {

using sdk::soname_matches;
using sdk::soname_prefix;

bool is_elf_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return false;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(p.c_str(), "rb"), &std::fclose);
  if (!f) return false;
  unsigned char magic[4] = {};
  return std::fread(magic, 1, 4, f.get()) == 4 && magic[0] == 0x7f && magic[1] == 'E' &&
         magic[2] == 'L' && magic[3] == 'F';
}

}  // namespace

LibraryResolver::LibraryResolver(std::string ldconfig_output, std::vector<std::string> search_dirs)
    : ldconfig_output_(std::move(ldconfig_output)), search_dirs_(std::move(search_dirs)) {}

LibraryResolver LibraryResolver::from_system() {
  std::string out;
  for (const char* cmd : {"/sbin/ldconfig -p 2>/dev/null", "ldconfig -p 2>/dev/null"}) {
    std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd, "r"), &pclose);
    if (!p) continue;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p.get())) > 0) out.append(buf, n);
    if (!out.empty()) break;
  }
  return LibraryResolver(std::move(out),
                         {std::begin(sdk::kLibraryDirs), std::end(sdk::kLibraryDirs)});
}

std::string LibraryResolver::from_cache(const std::string& prefix) const {
  // Lines look like: "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6".
  // Prefer this architecture's entry and the exact soname over a versioned one.
  std::istringstream in(ldconfig_output_);
  std::string line, best;
  int best_score = -1;
  while (std::getline(in, line)) {
    auto arrow = line.find(" => ");
    if (arrow == std::string::npos) continue;
    std::size_t start = line.find_first_not_of(" \t");
    std::size_t end = line.find_first_of(" \t", start);
    if (start == std::string::npos || end == std::string::npos) continue;
    std::string soname = line.substr(start, end - start);
    if (!soname_matches(soname, prefix)) continue;
    int score = 0;
#if defined(__x86_64__)
    if (line.find("x86-64") != std::string::npos) score += 2;
#elif defined(__aarch64__)
    if (line.find("AArch64") != std::string::npos) score += 2;
#endif
    if (soname.size() > prefix.size()) score += 1;  // runtime soname, not the dev symlink
    if (score > best_score) {
      best_score = score;
      best = line.substr(arrow + 4);
    }
  }
  return best;
}

std::string LibraryResolver::from_dirs(const std::string& prefix) const {
  for (const auto& dir : search_dirs_) {
    std::error_code ec;
    fs::path exact = fs::path(dir) / prefix;
    if (is_elf_file(exact)) return exact.string();
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string fname = it->path().filename().string();
      if (soname_matches(fname, prefix) && is_elf_file(it->path())) return it->path().string();
    }
  }
  return {};
}

std::string LibraryResolver::from_path_env(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::istringstream in(path);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / name;
    if (is_elf_file(p)) return p.string();
  }
  return {};
}

std::string LibraryResolver::resolve(const std::string& binary, int pid) const {
  if (binary.empty()) throw std::runtime_error("empty binary name");
  if (binary.find('/') != std::string::npos) {
    std::error_code ec;
    fs::path p = fs::absolute(binary, ec);
    if (ec || !fs::exists(p)) throw std::runtime_error("binary '" + binary + "' does not exist");
    if (!is_elf_file(p)) throw std::runtime_error("'" + binary + "' is not an ELF file");
    return fs::canonical(p, ec).string();
  }
  std::string prefix = soname_prefix(binary);
  // The library the target process maps (through /proc/PID/root in another mount
  // namespace), else the one loupe maps (sdk::locate_library's order): that is the file
  // the calls go through. The ldconfig cache and the directories only serve libraries
  // neither maps.
  if (pid > 0)
    if (std::string mapped = sdk::find_mapped_library(pid, binary); !mapped.empty()) return mapped;
  if (std::string own = sdk::find_mapped_library(0, binary); !own.empty()) return own;
  std::string found = from_cache(prefix);
  if (found.empty()) found = from_dirs(prefix);
  if (found.empty() && binary.find(".so") == std::string::npos) found = from_path_env(binary);
  if (found.empty())
    throw std::runtime_error("cannot find '" + binary + "': no " + prefix +
                             "* in the ldconfig cache or the library directories, and no "
                             "executable of that name in PATH; give an absolute path");
  std::error_code ec;
  auto canon = fs::canonical(found, ec);
  return ec ? found : canon.string();
}

}  // namespace loupe::latency
