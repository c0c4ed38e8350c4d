// SPDX-License-Identifier: Apache-2.0
//
// `loupe probes BINARY`: the USDT probes a binary or library ships, so a user can write
// usdt targets without readelf. Read from the file's notes as libbpf reads them at attach.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "loupe/sdk/usdt.hpp"
#include "loupe/session.hpp"

namespace loupe::cli {
namespace {

// A bare name is looked up in PATH, as a shell would run it.
std::string find_binary(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return name;
}

}  // namespace

int cmd_probes(const std::string& binary, bool as_json) {
  std::string path = find_binary(binary);
  std::error_code ec;
  auto real = std::filesystem::canonical(path, ec);
  if (!ec) path = real.string();
  std::vector<sdk::UsdtProbe> probes;
  try {
    probes = sdk::read_usdt_probes(path);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return static_cast<int>(ExitCode::kUsage);
  }
  // One row per provider:name; several sites of one name are one target for loupe.
  struct Row {
    std::size_t sites = 0;
    bool semaphore = false;
    std::string args;
  };
  std::map<std::string, Row> rows;
  for (const auto& p : probes) {
    Row& r = rows[p.provider + ":" + p.name];
    ++r.sites;
    r.semaphore |= p.semaphore != 0;
    if (r.args.empty()) r.args = p.args;
  }
  if (as_json) {
    nlohmann::json out = {{"binary", path}, {"probes", nlohmann::json::array()}};
    for (const auto& [name, r] : rows)
      out["probes"].push_back(
          {{"probe", name}, {"sites", r.sites}, {"semaphore", r.semaphore}, {"args", r.args}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (rows.empty()) {
    fmt::print("{}: no USDT probes (no .note.stapsdt section)\n", path);
    return 0;
  }
  fmt::print("{}: {} USDT probe(s), {} site(s)\n", path, rows.size(), probes.size());
  std::size_t width = 0;
  for (const auto& [name, r] : rows) width = std::max(width, name.size());
  for (const auto& [name, r] : rows)
    fmt::print("  {:<{}}  sites {:>2}{}  args: {}\n", name, width, r.sites,
               r.semaphore ? "  semaphore" : "           ", r.args.empty() ? "(none)" : r.args);
  fmt::print(
      "\nuse as: usdt = \"{}:PROVIDER:NAME\" (or usdt_entry / usdt_exit) in a latency "
      "target; label_arg = N makes argument N a label\n",
      path);
  return 0;
}

}  // namespace loupe::cli
