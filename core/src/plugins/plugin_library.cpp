// SPDX-License-Identifier: Apache-2.0
#include "loupe/plugin_library.hpp"

#include "plugins/config_schema.hpp"
#include "plugins/profile.hpp"

#include <fmt/format.h>

#include <dlfcn.h>

#include <boost/dll/shared_library.hpp>
#include <cstddef>
#include <regex>
#include <set>

namespace loupe {
namespace {

// The smallest table a 1.0 plugin can hand us: everything up to and including last_error.
constexpr std::size_t kMinDescriptorSize =
    offsetof(loupe_plugin_descriptor, last_error) + sizeof(void*);
constexpr std::size_t kMinConfigKeySize =
    offsetof(loupe_config_key, reserved) + sizeof(std::uint32_t);

bool valid_identifier(const char* s, bool allow_dash) {
  if (s == nullptr || *s == '\0') return false;
  for (const char* p = s; *p; ++p) {
    char c = *p;
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (allow_dash && c == '-');
    if (!ok) return false;
  }
  return true;
}

std::optional<std::string> check_keys(const loupe_config_key* keys, std::uint32_t n,
                                      std::uint32_t stride, const std::string& where, int depth) {
  if (n == 0) return std::nullopt;
  if (keys == nullptr)
    return fmt::format("{}: declares {} config keys but the key array is NULL", where, n);
  if (depth > 2) return fmt::format("{}: config tables nest deeper than 2 levels", where);
  std::set<std::string> seen;
  auto* base = reinterpret_cast<const unsigned char*>(keys);
  for (std::uint32_t i = 0; i < n; ++i) {
    auto* k =
        reinterpret_cast<const loupe_config_key*>(base + static_cast<std::size_t>(i) * stride);
    if (!valid_identifier(k->name, false))
      return fmt::format("{}: config key #{} has an invalid name (expected [a-z0-9_]+, found '{}')",
                         where, i, k->name ? k->name : "(null)");
    if (k->name == std::string("name") || k->name == std::string("library") ||
        k->name == std::string("enabled"))
      if (depth == 0)
        return fmt::format("{}: config key '{}' is reserved by the host", where, k->name);
    if (!seen.insert(k->name).second)
      return fmt::format("{}: config key '{}' declared twice", where, k->name);
    if (k->type < LOUPE_CFG_BOOL || k->type > LOUPE_CFG_TABLE_LIST)
      return fmt::format("{}: config key '{}' has unknown type {} (expected 1..7)", where, k->name,
                         k->type);
    if (k->help == nullptr || *k->help == '\0')
      return fmt::format("{}: config key '{}' has no help text", where, k->name);
    if (k->min_int > k->max_int)
      return fmt::format("{}: config key '{}' has min {} > max {}", where, k->name, k->min_int,
                         k->max_int);
    auto choices = key_choices(*k, stride);
    if (!choices.empty() && k->type != LOUPE_CFG_STRING && k->type != LOUPE_CFG_STRING_LIST)
      return fmt::format("{}: config key '{}' lists choices but is not a string or string list",
                         where, k->name);
    if (k->default_value != nullptr && k->type != LOUPE_CFG_TABLE_LIST) {
      // The schema is the only place a default lives, so a default the schema itself
      // refuses would surface as a confusing run-time error: refuse the plugin instead.
      ConfigValue v;
      if (!parse_default(*k, stride, v))
        return fmt::format("{}: config key '{}' has default {} that its own type{} refuses", where,
                           k->name, k->default_value,
                           choices.empty() ? "" : " and choices (" + quoted_choices(choices) + ")");
    }
    if (k->type == LOUPE_CFG_TABLE_LIST) {
      if (k->n_fields == 0 || k->fields == nullptr)
        return fmt::format("{}: table-list key '{}' declares no fields", where, k->name);
      if (auto e = check_keys(k->fields, k->n_fields, stride, where + "." + k->name, depth + 1))
        return e;
    }
  }
  return std::nullopt;
}

// Boost.DLL reduces dlopen failures to an errno text ("Bad file descriptor"); the
// loader's own message ("invalid ELF header", "undefined symbol: x") is what helps.
std::string loader_error(const std::filesystem::path& path, const boost::dll::fs::error_code& ec) {
  dlerror();
  if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    return ec.message();
  }
  const char* e = dlerror();
  return e ? e : ec.message();
}

}  // namespace

const char* kind_name(std::uint32_t kind) noexcept {
  switch (kind) {
    case LOUPE_KIND_PROFILER: return "profiler";
    case LOUPE_KIND_SINK: return "sink";
    default: return "unknown";
  }
}

std::optional<std::string> check_descriptor(const loupe_plugin_descriptor* d,
                                            const std::string& origin) {
  if (d == nullptr) return fmt::format("{}: {}() returned NULL", origin, LOUPE_PLUGIN_ENTRY_SYMBOL);
  if (d->size < kMinDescriptorSize)
    return fmt::format(
        "{}: descriptor table truncated: expected at least {} bytes (ABI {}.0), found {}", origin,
        kMinDescriptorSize, LOUPE_ABI_MAJOR, d->size);
  if (d->abi_major != LOUPE_ABI_MAJOR)
    return fmt::format(
        "{}: plugin ABI {}.{} is incompatible with host ABI {}.{} (major versions differ)", origin,
        d->abi_major, d->abi_minor, LOUPE_ABI_MAJOR, LOUPE_ABI_MINOR);
  if (d->abi_minor > LOUPE_ABI_MINOR)
    return fmt::format(
        "{}: plugin ABI {}.{} is newer than host ABI {}.{} (rebuild the plugin against this "
        "SDK or upgrade loupe)",
        origin, d->abi_major, d->abi_minor, LOUPE_ABI_MAJOR, LOUPE_ABI_MINOR);
  if (d->size > sizeof(loupe_plugin_descriptor)) {
    // A same-minor table cannot be larger than ours unless it was built wrong.
    return fmt::format("{}: descriptor is {} bytes, larger than ABI {}.{} defines ({})", origin,
                       d->size, LOUPE_ABI_MAJOR, LOUPE_ABI_MINOR, sizeof(loupe_plugin_descriptor));
  }
  if (d->kind != LOUPE_KIND_PROFILER && d->kind != LOUPE_KIND_SINK)
    return fmt::format("{}: unknown plugin kind {} (expected 1=profiler or 2=sink)", origin,
                       d->kind);
  if (!valid_identifier(d->name, true))
    return fmt::format("{}: plugin name must match [a-z0-9_-]+, found '{}'", origin,
                       d->name ? d->name : "(null)");
  if (d->version == nullptr || *d->version == '\0')
    return fmt::format("{}: plugin '{}' has no version string", origin, d->name);
  struct Hook {
    const void* fn;
    const char* name;
    bool required;
  };
  const bool profiler = d->kind == LOUPE_KIND_PROFILER;
  const Hook hooks[] = {
      {reinterpret_cast<const void*>(d->setup), "setup", true},
      {reinterpret_cast<const void*>(d->destroy), "destroy", true},
      {reinterpret_cast<const void*>(d->last_error), "last_error", true},
      {reinterpret_cast<const void*>(d->start), "start", profiler},
      {reinterpret_cast<const void*>(d->consume), "consume", !profiler},
  };
  for (const auto& h : hooks)
    if (h.required && h.fn == nullptr)
      return fmt::format("{}: {} '{}' lacks the required hook '{}'", origin, kind_name(d->kind),
                         d->name, h.name);
  if (d->n_config_keys > 0 && d->config_key_size < kMinConfigKeySize)
    return fmt::format("{}: config_key_size {} is smaller than ABI {}.0's {}", origin,
                       d->config_key_size, LOUPE_ABI_MAJOR, kMinConfigKeySize);
  // Any compiler pads the struct to its alignment; another stride would misalign every key.
  if (d->n_config_keys > 0 && d->config_key_size % alignof(loupe_config_key) != 0)
    return fmt::format(
        "{}: config_key_size {} is not a multiple of {} (not a compiled loupe_config_key array)",
        origin, d->config_key_size, alignof(loupe_config_key));
  return check_keys(d->config_keys, d->n_config_keys, d->config_key_size,
                    origin + " [" + d->name + "]", 0);
}

struct PluginLibrary::Handle {
  boost::dll::shared_library lib;
};

PluginLibrary::~PluginLibrary() = default;

std::shared_ptr<PluginLibrary> PluginLibrary::open(const std::filesystem::path& path) {
  std::shared_ptr<PluginLibrary> out(new PluginLibrary());
  out->origin_ = path.string();
  out->handle_ = std::make_unique<Handle>();
  boost::dll::fs::error_code ec;
  // RTLD_LOCAL (boost's default) keeps one plugin's symbols from satisfying another's.
  out->handle_->lib.load(boost::dll::fs::path(path), boost::dll::load_mode::default_mode, ec);
  if (ec)
    throw PluginLoadError(
        fmt::format("{}: cannot load shared library: {}", path.string(), loader_error(path, ec)));
  if (!out->handle_->lib.has(LOUPE_PLUGIN_ENTRY_SYMBOL))
    throw PluginLoadError(
        fmt::format("{}: not a loupe plugin: expected exported symbol '{}', not found",
                    path.string(), LOUPE_PLUGIN_ENTRY_SYMBOL));
  auto entry = out->handle_->lib.get<const loupe_plugin_descriptor*()>(LOUPE_PLUGIN_ENTRY_SYMBOL);
  const loupe_plugin_descriptor* d = entry();
  if (auto err = check_descriptor(d, out->origin_)) throw PluginLoadError(*err);
  out->descriptor_ = d;
  out->name_ = d->name;
  return out;
}

std::shared_ptr<PluginLibrary> PluginLibrary::from_descriptor(const loupe_plugin_descriptor* d,
                                                              std::string origin) {
  if (auto err = check_descriptor(d, origin)) throw PluginLoadError(*err);
  std::shared_ptr<PluginLibrary> out(new PluginLibrary());
  out->descriptor_ = d;
  out->name_ = d->name;
  out->origin_ = std::move(origin);
  return out;
}

}  // namespace loupe
