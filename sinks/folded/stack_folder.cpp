// SPDX-License-Identifier: Apache-2.0
#include "stack_folder.hpp"

#include <cstring>

#include "loupe/report/folded_frame.hpp"

namespace loupe::sinks {
namespace {

const loupe_value* pick_value(const loupe_stack_sample& s, const std::string& name) {
  if (!s.values || s.n_values == 0) return nullptr;
  if (name.empty()) return &s.values[0];
  for (std::uint32_t i = 0; i < s.n_values; ++i)
    if (s.values[i].name && name == s.values[i].name) return &s.values[i];
  return nullptr;
}

const char* label(const loupe_record& rec, const char* key) {
  for (std::uint32_t i = 0; i < rec.n_labels && rec.labels; ++i)
    if (rec.labels[i].key && std::strcmp(rec.labels[i].key, key) == 0) return rec.labels[i].value;
  return nullptr;
}

}  // namespace

bool StackFolder::add(const loupe_record& rec) {
  if (rec.kind != LOUPE_RECORD_STACK_SAMPLE || !rec.stack || !rec.name) {
    ++skipped_;
    return false;
  }
  const loupe_stack_sample& s = *rec.stack;
  const loupe_value* v = pick_value(s, opts_.value_name);
  if (!v) {
    ++skipped_;
    return false;
  }
  std::string stack;
  stack.reserve(32 * (s.n_frames + 1));
  if (opts_.include_comm) {
    if (const char* comm = label(rec, "comm"); comm && *comm) {
      report::append_folded_text(comm, stack);
    }
  }
  // Records hold frames leaf first; the folded format reads root first.
  for (std::uint32_t i = s.n_frames; i-- > 0;) {
    if (!stack.empty()) stack += ';';
    report::append_folded_frame(s.frames[i], stack);
  }
  if (stack.empty()) stack = "[no stack]";
  by_name_[rec.name][stack] += v->value;
  return true;
}

std::string StackFolder::render(const Stacks& stacks, const std::string& root_prefix) {
  std::string out;
  for (const auto& [stack, value] : stacks) {
    if (value <= 0) continue;
    if (!root_prefix.empty()) {
      report::append_folded_text(root_prefix, out);
      out += ';';
    }
    out += stack;
    out += ' ';
    out += std::to_string(value);
    out += '\n';
  }
  return out;
}

}  // namespace loupe::sinks
