// SPDX-License-Identifier: Apache-2.0
//
// Turns the stack-sample records of one record name into one pprof Profile
// (github.com/google/pprof proto/profile.proto): each distinct value name becomes a
// sample type with its unit, each module a mapping, each symbol a function, each
// (module, address, function) a location; identical stacks with identical labels add up.
#ifndef LOUPE_SINKS_PPROF_PROFILE_BUILDER_HPP
#define LOUPE_SINKS_PPROF_PROFILE_BUILDER_HPP

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loupe/abi/records.h"
#include "proto/profile.pb.h"

namespace loupe::sinks {

// pprof spells units out ("nanoseconds"); records use short forms ("ns").
std::string pprof_unit(const char* unit);

class ProfileBuilder {
 public:
  ProfileBuilder();

  // Adds one stack-sample record; false (and nothing added) for anything else.
  bool add(const loupe_record& rec);

  std::uint64_t samples() const { return samples_.size(); }

  // The Profile message, serialized (not yet compressed).
  std::string serialize() const;

 private:
  std::int64_t str(const std::string& s);
  std::uint64_t mapping(const loupe_frame& f);
  std::uint64_t function(const loupe_frame& f);
  std::uint64_t location(const loupe_frame& f);
  std::size_t sample_type(const loupe_value& v);

  perftools::profiles::Profile tables_;  // everything but the samples
  std::unordered_map<std::string, std::int64_t> strings_;
  std::map<std::string, std::uint64_t> mappings_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> functions_;
  // (mapping, address, function, line): a Python frame's address is its code object's, one
  // location per line of it.
  std::map<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>, std::uint64_t>
      locations_;
  std::map<std::pair<std::string, std::string>, std::size_t> types_;

  struct SampleKey {
    std::vector<std::uint64_t> locations;                       // leaf first
    std::vector<std::pair<std::int64_t, std::int64_t>> labels;  // string indices
    bool operator<(const SampleKey& o) const {
      return std::tie(locations, labels) < std::tie(o.locations, o.labels);
    }
  };
  std::map<SampleKey, std::map<std::size_t, std::int64_t>> samples_;  // type index -> sum
  std::uint64_t window_start_ = 0;
  std::uint64_t window_end_ = 0;
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PPROF_PROFILE_BUILDER_HPP
