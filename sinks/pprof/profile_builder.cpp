// SPDX-License-Identifier: Apache-2.0
#include "profile_builder.hpp"

#include <string_view>

#include "loupe/report/frame_name.hpp"

namespace loupe::sinks {
namespace pb = perftools::profiles;

std::string pprof_unit(const char* unit) {
  std::string_view u = unit ? unit : "";
  if (u.empty()) return "count";
  if (u == "ns") return "nanoseconds";
  if (u == "us") return "microseconds";
  if (u == "ms") return "milliseconds";
  if (u == "s") return "seconds";
  if (u == "b" || u == "byte") return "bytes";
  return std::string(u);
}

ProfileBuilder::ProfileBuilder() {
  str("");
}  // string_table[0] must be ""

std::int64_t ProfileBuilder::str(const std::string& s) {
  auto [it, inserted] = strings_.try_emplace(s, static_cast<std::int64_t>(strings_.size()));
  if (inserted) tables_.add_string_table(s);
  return it->second;
}

std::uint64_t ProfileBuilder::mapping(const loupe_frame& f) {
  // A Python frame's module is its source file: no mapping of the process's memory.
  if (!f.module || !*f.module || LOUPE_FRAME_IS_SOURCE(f.kind)) return 0;
  auto [it, inserted] = mappings_.try_emplace(f.module, mappings_.size() + 1);
  if (inserted) {
    pb::Mapping* m = tables_.add_mapping();
    m->set_id(it->second);
    m->set_filename(str(f.module));
    // Frames arrive symbolized by loupe: this tells pprof not to look for the binary to
    // symbolize them again.
    m->set_has_functions(true);
  }
  return it->second;
}

std::uint64_t ProfileBuilder::function(const loupe_frame& f) {
  // A Python function is named as written; its file and line go in their own fields.
  std::string name =
      LOUPE_FRAME_IS_SOURCE(f.kind) && f.symbol ? std::string(f.symbol) : report::frame_name(f);
  std::string file = f.module ? f.module : "";
  auto [it, inserted] = functions_.try_emplace({name, file}, functions_.size() + 1);
  if (inserted) {
    pb::Function* fn = tables_.add_function();
    fn->set_id(it->second);
    fn->set_name(str(name));
    fn->set_system_name(str(name));
    fn->set_filename(str(file));
  }
  return it->second;
}

std::uint64_t ProfileBuilder::location(const loupe_frame& f) {
  std::uint64_t map_id = mapping(f);
  std::uint64_t fn_id = function(f);
  const std::uint64_t line = LOUPE_FRAME_IS_SOURCE(f.kind) ? f.offset : 0;
  auto [it, inserted] =
      locations_.try_emplace({map_id, f.address, fn_id, line}, locations_.size() + 1);
  if (inserted) {
    pb::Location* loc = tables_.add_location();
    loc->set_id(it->second);
    loc->set_mapping_id(map_id);
    loc->set_address(f.address);
    pb::Line* l = loc->add_line();
    l->set_function_id(fn_id);
    if (line) l->set_line(static_cast<std::int64_t>(line));
  }
  return it->second;
}

std::size_t ProfileBuilder::sample_type(const loupe_value& v) {
  std::string name = v.name && *v.name ? v.name : "value";
  std::string unit = pprof_unit(v.unit);
  auto [it, inserted] = types_.try_emplace({name, unit}, types_.size());
  if (inserted) {
    pb::ValueType* t = tables_.add_sample_type();
    t->set_type(str(name));
    t->set_unit(str(unit));
    if (it->second == 0) tables_.set_default_sample_type(t->type());
  }
  return it->second;
}

bool ProfileBuilder::add(const loupe_record& rec) {
  if (rec.kind != LOUPE_RECORD_STACK_SAMPLE || !rec.stack || rec.stack->n_values == 0) return false;
  const loupe_stack_sample& s = *rec.stack;
  SampleKey key;
  key.locations.reserve(s.n_frames);
  for (std::uint32_t i = 0; i < s.n_frames; ++i) key.locations.push_back(location(s.frames[i]));
  for (std::uint32_t i = 0; i < rec.n_labels && rec.labels; ++i) {
    if (!rec.labels[i].key || !rec.labels[i].value) continue;
    key.labels.emplace_back(str(rec.labels[i].key), str(rec.labels[i].value));
  }
  auto& values = samples_[key];
  for (std::uint32_t i = 0; i < s.n_values; ++i)
    values[sample_type(s.values[i])] += s.values[i].value;
  if (rec.window_start_ns && (window_start_ == 0 || rec.window_start_ns < window_start_))
    window_start_ = rec.window_start_ns;
  if (rec.window_end_ns > window_end_) window_end_ = rec.window_end_ns;
  if (rec.plugin && *rec.plugin && tables_.comment_size() == 0)
    tables_.add_comment(str(std::string("loupe plugin ") + rec.plugin));
  return true;
}

std::string ProfileBuilder::serialize() const {
  pb::Profile p = tables_;
  for (const auto& [key, values] : samples_) {
    pb::Sample* s = p.add_sample();
    for (std::uint64_t id : key.locations) s->add_location_id(id);
    // Every sample carries one value per sample type, 0 where its records had none.
    for (std::size_t t = 0; t < types_.size(); ++t) {
      auto v = values.find(t);
      s->add_value(v == values.end() ? 0 : v->second);
    }
    for (const auto& [k, v] : key.labels) {
      pb::Label* l = s->add_label();
      l->set_key(k);
      l->set_str(v);
    }
  }
  p.set_time_nanos(static_cast<std::int64_t>(window_start_));
  if (window_end_ > window_start_)
    p.set_duration_nanos(static_cast<std::int64_t>(window_end_ - window_start_));
  std::string out;
  if (!p.SerializeToString(&out)) throw std::runtime_error("pprof: cannot serialize the profile");
  return out;
}

}  // namespace loupe::sinks
