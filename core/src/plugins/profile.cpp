// SPDX-License-Identifier: Apache-2.0
#include "plugins/profile.hpp"

#include "loupe/config_schema.hpp"
#include "plugins/config_schema.hpp"
#include "plugins/runtime_keys.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <string_view>

namespace loupe {
namespace {

SourcePos pos_of(const toml::source_region& r, const std::string& file) {
  return SourcePos{file, static_cast<std::uint32_t>(r.begin.line),
                   static_cast<std::uint32_t>(r.begin.column)};
}

const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}
  void error(const toml::node& n, std::string msg) {
    diags_.push_back({pos_of(n.source(), file_), std::move(msg)});
  }
  void error(const toml::key& k, std::string msg) {
    diags_.push_back({pos_of(k.source(), file_), std::move(msg)});
  }
  void error(SourcePos p, std::string msg) { diags_.push_back({std::move(p), std::move(msg)}); }
  void throw_if_any() {
    if (!diags_.empty()) throw ProfileError(std::move(diags_));
  }
  void move_to(std::vector<Diagnostic>& out) {
    for (auto& d : diags_) out.push_back(std::move(d));
    diags_.clear();
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<Diagnostic> diags_;
};

std::optional<double> as_number(const toml::node& n) {
  if (auto i = n.as_integer()) return static_cast<double>(i->get());
  if (auto f = n.as_floating_point()) return f->get();
  return std::nullopt;
}

void validate_table(const toml::table& t, const loupe_config_key* keys, std::uint32_t n,
                    std::uint32_t stride, const std::string& where,
                    const std::vector<std::string_view>& handled, loupe_config& out, Checker& c);

// The [session] keys, declared as a plugin declares its own, so that the one validator
// checks both (unknown keys with "did you mean", types, choices, integer ranges) and
// reports every error of a profile in one pass. `command` (a string or an array of
// strings) is read by hand, and the seconds keys' bounds are checked after it.
const char* const kOnPluginError[] = {"fail", "continue", nullptr};
const loupe_config_key kSessionKeys[] = {
    {"duration", LOUPE_CFG_FLOAT, 0, "0", "seconds; 0 = until the command/pid exits or a signal"},
    {"interval", LOUPE_CFG_FLOAT, 0, "0", "seconds between interval reports; 0 = final only"},
    {"output_dir", LOUPE_CFG_STRING, 0, "\"loupe-out\"", "where sinks write their files"},
    {"pid", LOUPE_CFG_INT, 0, "0", "profile this process (0 = system-wide)", 0, kMaxPid},
    {"command", LOUPE_CFG_STRING_LIST, 0, nullptr, "start and profile this command"},
    {"follow", LOUPE_CFG_BOOL, 0, "true", "profile the target's descendants too"},
    {"on_plugin_error", LOUPE_CFG_STRING, 0, "\"fail\"",
     "a plugin failing setup/start ends the run, or is skipped", 0, 0, nullptr, 0, 0,
     kOnPluginError},
    {"drain_timeout", LOUPE_CFG_FLOAT, 0, "2",
     "seconds the end waits for rings and sinks to drain (again while records are being decoded, "
     "up to 4 times it)"},
    {"user", LOUPE_CFG_STRING, 0, nullptr, "switch to this user once every probe is attached"},
    {"allow_insecure_plugins", LOUPE_CFG_BOOL, 0, "false",
     "load plugins from group/world-writable files or directories"},
    {"stats", LOUPE_CFG_BOOL, 0, "false", "per-probe BPF run-time statistics"},
    {"symbol_processes", LOUPE_CFG_INT, 0, "1024",
     "processes whose symbols are kept, exited ones included (reports name their stacks "
     "after they exit)",
     16, 1 << 20},
    {"unwind_rows", LOUPE_CFG_INT, 0, "0",
     "rows of the in-kernel unwinder's tables, shared by every plugin (8 bytes each, allocated "
     "at start; libc has 28k); 0 = 1048576 (8 MiB: node alone has 372k) for a command or --pid, "
     "2097152 (16 MiB) "
     "system-wide, where every binary of the machine needs rows; files past it unwind by frame "
     "pointers (counted in unwind_rows_full)",
     0, 16777216},
    {"rotate", LOUPE_CFG_FLOAT, 0, "0",
     "seconds per window: each window's files go into <output_dir>/windows/<start time>/; 0 = "
     "the session is one window"},
    {"retain", LOUPE_CFG_INT, 0, "0", "windows kept, the oldest removed first; 0 = all", 0,
     1000000},
    {"max_cpu_percent", LOUPE_CFG_FLOAT, 0, "0",
     "loupe's declared cost: its BPF programs' run time plus its threads' CPU time, in percent "
     "of all online CPUs; measured at every report (BPF statistics on) and a report over it is "
     "counted and said (health `budget`); 0 = not measured"},
    {"delivery_delay_ms", LOUPE_CFG_INT, 0, "20",
     "longest a record waits in a ring before the reader takes it (records past a ring's "
     "watermark wake it at once); the reader wakes this often while the rings are empty, so an "
     "always-on agent that reports by the minute can raise it (--delivery-delay overrides)",
     1, 10000},
    {"retain_bytes", LOUPE_CFG_INT, 0, "0",
     "bytes the kept windows may take, the oldest removed first (the newest is always kept); 0 "
     "= no bound",
     0, std::int64_t{1} << 50},
};

struct SecondsKey {
  std::string_view name;
  double max;
};
constexpr SecondsKey kSecondsKeys[] = {{"duration", 7 * 24 * 3600.0},
                                       {"interval", 24 * 3600.0},
                                       {"drain_timeout", 600},
                                       {"rotate", 24 * 3600.0}};

void parse_session(const toml::table& t, SessionSpec& s, Checker& c) {
  loupe_config cfg;
  validate_table(t, kSessionKeys, static_cast<std::uint32_t>(std::size(kSessionKeys)),
                 sizeof(loupe_config_key), "session", {"command"}, cfg, c);
  auto& v = cfg.values;
  s.duration_s = v["duration"].f;
  s.interval_s = v["interval"].f;
  s.drain_timeout_s = v["drain_timeout"].f;
  s.output_dir = v["output_dir"].s;
  s.pid = static_cast<int>(v["pid"].i);
  s.follow = v["follow"].b;
  s.continue_on_plugin_error = v["on_plugin_error"].s == "continue";
  s.user = v["user"].s;
  s.allow_insecure_plugins = v["allow_insecure_plugins"].b;
  s.stats = v["stats"].b;
  s.symbol_processes = static_cast<std::size_t>(v["symbol_processes"].i);
  s.unwind_rows = static_cast<std::uint32_t>(v["unwind_rows"].i);
  s.rotate_s = v["rotate"].f;
  s.retain = static_cast<std::size_t>(v["retain"].i);
  s.retain_bytes = static_cast<std::uint64_t>(v["retain_bytes"].i);
  s.max_cpu_percent = v["max_cpu_percent"].f;
  s.delivery_delay_ms = static_cast<std::uint32_t>(v["delivery_delay_ms"].i);
  if (auto node = t.get("max_cpu_percent");
      node &&
      (!std::isfinite(s.max_cpu_percent) || s.max_cpu_percent < 0 || s.max_cpu_percent > 100))
    c.error(*node, fmt::format("session.max_cpu_percent: {} is not a percentage of the machine's "
                               "CPUs (0 < p <= 100; 0 = no budget)",
                               s.max_cpu_percent));
  // What the schema cannot say: bounds of seconds, non-empty strings, string-or-array.
  for (const auto& k : kSecondsKeys)
    if (auto node = t.get(k.name); node && node->is_number())
      if (auto d = as_number(*node); d && std::isfinite(*d)) {
        std::string err = check_session_seconds(k.name, *d);
        if (!err.empty()) c.error(*node, fmt::format("session.{}: {}", k.name, err));
      }
  // A window is a directory of files: one a second is already more than any store reads.
  if (auto node = t.get("rotate"); node && s.rotate_s > 0 && s.rotate_s < 1)
    c.error(*node,
            fmt::format("session.rotate: {} is under 1 second (0 = no rotation)", s.rotate_s));
  for (const char* k : {"retain", "retain_bytes"})
    if (auto node = t.get(k);
        node && s.rotate_s == 0 && node->is_integer() && node->as_integer()->get() != 0)
      c.error(*node, fmt::format("session.{}: keeps windows, and there are none without "
                                 "`rotate` (add rotate = SECONDS)",
                                 k));
  for (const char* k : {"output_dir", "user"})
    if (auto node = t.get(k); node && node->is_string() && node->as_string()->get().empty())
      c.error(*node, fmt::format("session.{}: must not be empty", k));
  if (auto node = t.get("command")) {
    if (auto str = node->as_string()) {
      s.command = {str->get()};
    } else if (auto arr = node->as_array()) {
      for (auto&& e : *arr) {
        if (auto es = e.as_string())
          s.command.push_back(es->get());
        else
          c.error(e, "session.command: every element must be a string");
      }
    } else {
      c.error(*node,
              fmt::format("session.command: expected a string or an array of strings, found {}",
                          toml_type_name(*node)));
    }
  }
}

// [runtimes.<key>]: each runtime's own keys, as its row of the runtime table declares them.
// Every runtime gets a table (its defaults when the profile has none), so a runtime reads
// its keys without knowing whether the profile named them.
void parse_runtimes(const toml::node* node, SessionSpec& s, Checker& c) {
  std::vector<std::string> known;
  for (const auto& row : runtime_keys()) known.emplace_back(row.name);
  const toml::table* t = node ? node->as_table() : nullptr;
  if (node && !t) c.error(*node, "'runtimes' must be a table of tables ([runtimes.<runtime>])");
  if (t)
    for (auto&& [key, sub] : *t) {
      const std::string k(key.str());
      if (std::find(known.begin(), known.end(), k) != known.end() && sub.is_table()) continue;
      if (std::find(known.begin(), known.end(), k) != known.end()) {
        c.error(sub, fmt::format("runtimes.{}: expected a table ([runtimes.{}])", k, k));
        continue;
      }
      std::string list;
      for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
      const std::string hint = nearest_name(k, known);
      c.error(key,
              fmt::format("unknown runtime '{}' in runtimes{} (known: {})", k,
                          hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), list));
    }
  static const toml::table kNone;
  for (const auto& row : runtime_keys()) {
    const toml::node* sub = t ? t->get(row.name) : nullptr;
    const toml::table* table = sub && sub->is_table() ? sub->as_table() : &kNone;
    auto cfg = std::make_shared<loupe_config>();
    validate_table(*table, row.keys, row.n_keys, sizeof(loupe_config_key),
                   std::string("runtimes.") + row.name, {}, *cfg, c);
    s.runtimes[row.name] = std::move(cfg);
  }
}

void parse_plugin_list(const toml::node& node, PluginSpec::Kind kind, const char* section,
                       Profile& p, const std::filesystem::path& base, Checker& c) {
  auto arr = node.as_array();
  if (!arr || !arr->is_array_of_tables()) {
    c.error(node, fmt::format("'{}' must be an array of tables ([[{}]])", section, section));
    return;
  }
  for (auto&& e : *arr) {
    const toml::table& t = *e.as_table();
    PluginSpec spec;
    spec.kind = kind;
    spec.pos = pos_of(t.source(), c.file());
    auto name = t["name"];
    if (!name) {
      c.error(t, fmt::format("[[{}]] entry has no 'name'", section));
      continue;
    }
    if (!name.is_string()) {
      c.error(*name.node(), fmt::format("{}.name: expected a string, found {}", section,
                                        toml_type_name(*name.node())));
      continue;
    }
    spec.name = name.as_string()->get();
    if (auto path = t["library"]) {
      if (!path.is_string()) {
        c.error(*path.node(),
                fmt::format("{}.library: expected a string (path of the plugin's .so)", section));
      } else {
        std::filesystem::path pp(path.as_string()->get());
        spec.path = (pp.is_absolute() ? pp : base / pp).lexically_normal().string();
      }
    }
    if (auto en = t["enabled"]) {
      if (!en.is_boolean())
        c.error(*en.node(), fmt::format("{}.enabled: expected a boolean", section));
      else
        spec.enabled = en.as_boolean()->get();
    }
    // Aliasing pointer into the document: copies of toml++ nodes lose their source positions.
    spec.raw = std::shared_ptr<void>(p.document, const_cast<toml::table*>(&t));
    p.plugins.push_back(std::move(spec));
  }
}

Profile parse_table(std::shared_ptr<toml::table> doc, const std::string& origin,
                    std::vector<Diagnostic>& diags) {
  const toml::table& root = *doc;
  Profile p;
  p.document = doc;
  p.file = origin;
  Checker c(origin);
  auto base = std::filesystem::path(origin).parent_path();
  parse_runtimes(root.get("runtimes"), p.session, c);
  for (auto&& [key, node] : root) {
    const std::string k(key.str());
    if (k == "session") {
      if (auto t = node.as_table())
        parse_session(*t, p.session, c);
      else
        c.error(node, "'session' must be a table ([session])");
    } else if (k == "plugins") {
      parse_plugin_list(node, PluginSpec::Kind::kProfiler, "plugins", p, base, c);
    } else if (k == "sinks") {
      parse_plugin_list(node, PluginSpec::Kind::kSink, "sinks", p, base, c);
    } else if (k != "runtimes") {
      std::string hint = nearest_name(k, {"session", "plugins", "sinks", "runtimes"});
      c.error(key, fmt::format("unknown top-level key '{}' (expected [session], [[plugins]], "
                               "[[sinks]], [runtimes.<runtime>]){}",
                               k, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
    }
  }
  c.move_to(diags);
  return p;
}

// ---- schema validation ---------------------------------------------------------------

bool in_range(const loupe_config_key& k, std::int64_t v) {
  return (k.min_int == 0 && k.max_int == 0) || (v >= k.min_int && v <= k.max_int);
}

void convert_value(const toml::node& node, const loupe_config_key& k, std::uint32_t stride,
                   const std::string& where, ConfigValue& v, Checker& c) {
  const std::string full = where + "." + k.name;
  v.type = static_cast<loupe_config_type>(k.type);
  auto wrong = [&] {
    c.error(node, fmt::format("{}: expected {}, found {}", full, config_type_name(k.type),
                              toml_type_name(node)));
  };
  auto check_choice = [&](const toml::node& at, const std::string& value) {
    auto choices = key_choices(k, stride);
    if (choices.empty() || std::find(choices.begin(), choices.end(), value) != choices.end())
      return;
    std::vector<std::string> known(choices.begin(), choices.end());
    std::string hint = nearest_name(value, known);
    c.error(at, fmt::format("{}: \"{}\" is not allowed (expected {}){}", full, value,
                            quoted_choices(choices),
                            hint.empty() ? "" : fmt::format("; did you mean \"{}\"?", hint)));
  };
  auto range_error = [&](const toml::node& at, std::int64_t x) {
    c.error(at, fmt::format("{}: {} is out of range [{}, {}]", full, x, k.min_int, k.max_int));
  };
  switch (k.type) {
    case LOUPE_CFG_BOOL:
      if (auto b = node.as_boolean())
        v.b = b->get();
      else
        wrong();
      break;
    case LOUPE_CFG_INT:
      if (auto i = node.as_integer()) {
        v.i = i->get();
        if (!in_range(k, v.i)) range_error(node, v.i);
      } else {
        wrong();
      }
      break;
    case LOUPE_CFG_FLOAT:
      if (auto d = as_number(node)) {
        v.f = *d;
        if (!std::isfinite(v.f)) c.error(node, fmt::format("{}: must be finite", full));
      } else {
        wrong();
      }
      break;
    case LOUPE_CFG_STRING:
      if (auto s = node.as_string()) {
        v.s = s->get();
        check_choice(node, v.s);
      } else {
        wrong();
      }
      break;
    case LOUPE_CFG_STRING_LIST:
    case LOUPE_CFG_INT_LIST: {
      auto arr = node.as_array();
      if (!arr) return wrong();
      for (auto&& e : *arr) {
        if (k.type == LOUPE_CFG_STRING_LIST) {
          if (auto s = e.as_string()) {
            v.strings.push_back(s->get());
            check_choice(e, s->get());
          } else
            c.error(e, fmt::format("{}: every element must be a string, found {}", full,
                                   toml_type_name(e)));
        } else {
          if (auto i = e.as_integer()) {
            if (!in_range(k, i->get())) range_error(e, i->get());
            v.ints.push_back(i->get());
          } else {
            c.error(e, fmt::format("{}: every element must be an integer, found {}", full,
                                   toml_type_name(e)));
          }
        }
      }
      break;
    }
    case LOUPE_CFG_TABLE_LIST: {
      auto arr = node.as_array();
      if (!arr || !(arr->empty() || arr->is_array_of_tables())) return wrong();
      std::size_t idx = 0;
      for (auto&& e : *arr) {
        auto sub = std::make_unique<loupe_config>();
        validate_table(*e.as_table(), k.fields, k.n_fields, stride,
                       fmt::format("{}[{}]", full, idx++), {}, *sub, c);
        v.tables.push_back(std::move(sub));
      }
      break;
    }
  }
}

// `handled`: keys the caller reads itself (a plugin table's name, library, enabled):
// not converted here, but known to "did you mean".
void validate_table(const toml::table& t, const loupe_config_key* keys, std::uint32_t n,
                    std::uint32_t stride, const std::string& where,
                    const std::vector<std::string_view>& handled, loupe_config& out, Checker& c) {
  auto is_handled = [&](std::string_view k) {
    return std::find(handled.begin(), handled.end(), k) != handled.end();
  };
  for (auto&& [key, node] : t) {
    const std::string k(key.str());
    if (is_handled(k)) continue;
    const loupe_config_key* decl = nullptr;
    for (std::uint32_t i = 0; i < n && !decl; ++i)
      if (k == key_at(keys, i, stride)->name) decl = key_at(keys, i, stride);
    if (!decl) {
      std::string known;
      std::vector<std::string> names;
      for (std::uint32_t i = 0; i < n; ++i) {
        names.emplace_back(key_at(keys, i, stride)->name);
        known += (i ? ", " : "") + names.back();
      }
      for (auto h : handled) names.emplace_back(h);
      std::string hint = nearest_name(k, names);
      c.error(key, fmt::format("unknown key '{}' in {}{} (known: {})", k, where,
                               hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint),
                               known.empty() ? "none" : known));
      continue;
    }
    ConfigValue v;
    convert_value(node, *decl, stride, where, v, c);
    out.values[k] = std::move(v);
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    const loupe_config_key& k = *key_at(keys, i, stride);
    if (out.values.count(k.name) || is_handled(k.name)) continue;
    if (k.flags & LOUPE_CFG_REQUIRED) {
      c.error(pos_of(t.source(), c.file()),
              fmt::format("{}: required key '{}' is missing ({})", where, k.name, k.help));
      continue;
    }
    ConfigValue v;
    if (k.default_value && parse_default(k, stride, v)) out.values[k.name] = std::move(v);
  }
}

}  // namespace

std::string SourcePos::str() const {
  return line == 0 ? file : fmt::format("{}:{}:{}", file, line, column);
}

ProfileError::ProfileError(std::vector<Diagnostic> diags)
    : std::runtime_error([&] {
        std::string s;
        for (const auto& d : diags) s += (s.empty() ? "" : "\n") + d.str();
        return s;
      }()),
      diags_(std::move(diags)) {}

bool parse_default(const loupe_config_key& key, std::uint32_t stride, ConfigValue& out) {
  try {
    toml::table t = toml::parse(std::string("v = ") + key.default_value);
    Checker c("<default>");
    convert_value(*t.get("v"), key, stride, "default", out, c);
    try {
      c.throw_if_any();
    } catch (const ProfileError&) {
      return false;
    }
    return true;
  } catch (const toml::parse_error&) {
    return false;
  }
}

namespace {

ProfileError syntax_error(const toml::parse_error& e, const std::string& origin) {
  SourcePos p{origin, static_cast<std::uint32_t>(e.source().begin.line),
              static_cast<std::uint32_t>(e.source().begin.column)};
  return ProfileError({{p, std::string(e.description())}});
}

Profile or_throw(Profile p, std::vector<Diagnostic>& diags) {
  if (!diags.empty()) throw ProfileError(std::move(diags));
  return p;
}

}  // namespace

std::string check_session_seconds(std::string_view key, double seconds) {
  for (const auto& k : kSecondsKeys)
    if (k.name == key) {
      if (!std::isfinite(seconds)) return "must be finite";
      if (seconds < 0 || seconds > k.max)
        return fmt::format("{} is out of range [0, {}]", seconds, k.max);
      return "";
    }
  return "";
}

Profile read_profile_text(const std::string& text, const std::string& origin,
                          std::vector<Diagnostic>& diags) {
  try {
    return parse_table(std::make_shared<toml::table>(toml::parse(text, origin)), origin, diags);
  } catch (const toml::parse_error& e) {
    throw syntax_error(e, origin);
  }
}

Profile read_profile_file(const std::string& path, std::vector<Diagnostic>& diags) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ProfileError({{SourcePos{path}, "cannot read profile: a directory, not a TOML file"}});
  if (!std::filesystem::is_regular_file(path, ec))
    throw ProfileError({{SourcePos{path}, "cannot read profile: no such file"}});
  try {
    return parse_table(std::make_shared<toml::table>(toml::parse_file(path)), path, diags);
  } catch (const toml::parse_error& e) {
    throw syntax_error(e, path);
  }
}

Profile parse_profile_text(const std::string& text, const std::string& origin) {
  std::vector<Diagnostic> diags;
  return or_throw(read_profile_text(text, origin, diags), diags);
}

Profile parse_profile_file(const std::string& path) {
  std::vector<Diagnostic> diags;
  return or_throw(read_profile_file(path, diags), diags);
}

void validate_plugin_config(PluginSpec& spec, const loupe_plugin_descriptor& d) {
  Checker c(spec.pos.file);
  auto cfg = std::make_unique<loupe_config>();
  const auto& table = *std::static_pointer_cast<toml::table>(spec.raw);
  std::string where =
      fmt::format("{} '{}'", spec.kind == PluginSpec::Kind::kSink ? "sink" : "plugin", spec.name);
  validate_table(table, d.config_keys, d.n_config_keys,
                 d.config_key_size ? d.config_key_size : sizeof(loupe_config_key), where,
                 {"name", "library", "enabled"}, *cfg, c);
  c.throw_if_any();
  spec.config = std::move(cfg);
}

}  // namespace loupe
