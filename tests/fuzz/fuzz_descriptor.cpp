// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the plugin descriptor checks (verification check 1) on tables built from bytes:
// every scalar field (size, ABI version, kind, key stride, counts, bounds, flags, types),
// the strings (NULL, empty, hostile), the hooks (present or NULL) and config key arrays
// nested up to four levels, laid out at the declared stride. Pointers are never fuzzed
// raw: a plugin that lies about array lengths cannot be detected by any host, but every
// table that is well-formed memory must be either refused with a message or safe to use.
// A table the check accepts is then used: a profile (the rest of the bytes) is validated
// against it, which parses each declared default.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "loupe/plugin_library.hpp"
#include "plugins/profile.hpp"

namespace {

int fake_setup(const loupe_setup_args*, loupe_plugin**) {
  return 0;
}
int fake_start(loupe_plugin*, const loupe_start_args*) {
  return 0;
}
int fake_consume(loupe_plugin*, const loupe_record*) {
  return 0;
}
void fake_destroy(loupe_plugin*) {}
const char* fake_last_error(loupe_plugin*) {
  return "";
}

class TableBuilder {
 public:
  explicit TableBuilder(FuzzedDataProvider& in) : in_(in) {}

  const char* string() {
    switch (in_.ConsumeIntegralInRange(0, 5)) {
      case 0: return nullptr;
      case 1: return "";
      case 2: return "name";  // reserved at the top level
      case 3: return keep(in_.ConsumeBool() ? "1" : "\"x\"");
      default: return keep(in_.ConsumeRandomLengthString(24));
    }
  }

  // Lays `n` keys out at `stride` bytes apart in a block sized exactly for them, so a
  // read past the declared array or at the wrong stride is an ASan report.
  const loupe_config_key* keys(std::uint32_t n, std::uint32_t stride, int depth) {
    if (n == 0) return in_.ConsumeBool() ? nullptr : &empty_;
    std::size_t bytes = static_cast<std::size_t>(n - 1) * stride +
                        std::max<std::size_t>(stride, sizeof(loupe_config_key));
    unsigned char* block = blocks_.emplace_back(std::make_unique<unsigned char[]>(bytes)).get();
    std::memset(block, 0, bytes);
    for (std::uint32_t i = 0; i < n; ++i) {
      loupe_config_key k{};
      k.name = string();
      k.type = in_.ConsumeIntegralInRange<std::uint32_t>(0, 8);
      k.flags = in_.ConsumeIntegralInRange<std::uint32_t>(0, 3);
      k.default_value = string();
      k.help = in_.ConsumeBool() ? "help" : string();
      if (in_.ConsumeBool()) {
        k.min_int = in_.ConsumeIntegral<std::int64_t>();
        k.max_int = in_.ConsumeIntegral<std::int64_t>();
      }
      if (depth < 4 && in_.ConsumeBool()) {
        std::uint32_t nf = in_.ConsumeIntegralInRange<std::uint32_t>(0, 3);
        k.fields = keys(nf, stride, depth + 1);
        k.n_fields = nf;
      }
      std::memcpy(block + static_cast<std::size_t>(i) * stride, &k, sizeof(k));
    }
    return reinterpret_cast<const loupe_config_key*>(block);
  }

 private:
  const char* keep(std::string s) { return strings_.emplace_back(std::move(s)).c_str(); }

  FuzzedDataProvider& in_;
  std::deque<std::string> strings_;
  std::vector<std::unique_ptr<unsigned char[]>> blocks_;
  loupe_config_key empty_{};
};

template <typename T>
T mostly(FuzzedDataProvider& in, T good) {
  return in.ConsumeIntegralInRange(0, 3) != 0 ? good : in.ConsumeIntegral<T>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  TableBuilder b(in);
  loupe_plugin_descriptor d{};
  d.size = mostly<std::uint32_t>(in, sizeof(d));
  d.abi_major = mostly<std::uint16_t>(in, LOUPE_ABI_MAJOR);
  d.abi_minor = mostly<std::uint16_t>(in, LOUPE_ABI_MINOR);
  d.kind = in.ConsumeIntegralInRange<std::uint32_t>(0, 3);
  std::uint32_t strides[] = {sizeof(loupe_config_key), sizeof(loupe_config_key) + 8,
                             sizeof(loupe_config_key) - 8, sizeof(loupe_config_key) + 1,
                             in.ConsumeIntegralInRange<std::uint32_t>(0, 256)};
  d.config_key_size = strides[in.ConsumeIntegralInRange(0, 4)];
  d.name = in.ConsumeBool() ? "fuzz" : b.string();
  d.version = in.ConsumeBool() ? "1.0" : b.string();
  d.description = b.string();
  if (in.ConsumeBool()) d.setup = fake_setup;
  if (in.ConsumeBool()) d.start = fake_start;
  if (in.ConsumeBool()) d.consume = fake_consume;
  if (in.ConsumeBool()) d.destroy = fake_destroy;
  if (in.ConsumeBool()) d.last_error = fake_last_error;
  d.n_config_keys = in.ConsumeIntegralInRange<std::uint32_t>(0, 6);
  d.config_keys = b.keys(d.n_config_keys, std::max<std::uint32_t>(d.config_key_size, 1), 0);

  auto refusal = loupe::check_descriptor(&d, "/fuzz/loupe-fuzz.so");
  if (refusal) {
    if (refusal->find("/fuzz/loupe-fuzz.so") == std::string::npos)
      __builtin_trap();  // must name the file
    return 0;
  }
  std::string profile = "[[plugins]]\nname = \"fuzz\"\n" + in.ConsumeRemainingBytesAsString();
  try {
    loupe::Profile p = loupe::parse_profile_text(profile, "/fuzz/profile.toml");
    for (auto& spec : p.plugins) {
      try {
        loupe::validate_plugin_config(spec, d);
      } catch (const loupe::ProfileError&) {
      }
    }
  } catch (const loupe::ProfileError&) {
  }
  return 0;
}
