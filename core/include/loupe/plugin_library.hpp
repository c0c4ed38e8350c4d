// SPDX-License-Identifier: Apache-2.0
//
// One loaded plugin library: the shared object (kept alive as long as this object) and
// its checked descriptor.
#ifndef LOUPE_PLUGIN_LIBRARY_HPP
#define LOUPE_PLUGIN_LIBRARY_HPP

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "loupe/abi/plugin.h"

namespace loupe {

// Verification check 1: ABI version, table size, kind, required hooks, config schema.
// Returns the refusal text (naming `origin`, what was expected and what was found), or
// nullopt when the descriptor is acceptable. Pure: unit-tested on in-process tables.
std::optional<std::string> check_descriptor(const loupe_plugin_descriptor* d,
                                            const std::string& origin);

const char* kind_name(std::uint32_t kind) noexcept;

class PluginLibrary {
 public:
  // Loads `path`, resolves LOUPE_PLUGIN_ENTRY_SYMBOL and checks the descriptor.
  // Throws PluginLoadError with a message naming the file on any failure.
  static std::shared_ptr<PluginLibrary> open(const std::filesystem::path& path);
  // For plugins linked into the host (tests, embedding): no shared object.
  static std::shared_ptr<PluginLibrary> from_descriptor(const loupe_plugin_descriptor* d,
                                                        std::string origin);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const loupe_plugin_descriptor& descriptor() const { return *descriptor_; }
  const std::string& name() const { return name_; }
  const std::string& origin() const { return origin_; }  // file path or "builtin:..."

 private:
  PluginLibrary() = default;
  struct Handle;
  std::unique_ptr<Handle> handle_;
  const loupe_plugin_descriptor* descriptor_ = nullptr;
  std::string name_;
  std::string origin_;
};

class PluginLoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace loupe

#endif  // LOUPE_PLUGIN_LIBRARY_HPP
