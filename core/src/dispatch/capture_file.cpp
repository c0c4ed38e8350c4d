// SPDX-License-Identifier: Apache-2.0
#include "dispatch/capture_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace loupe {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'U', 'P', 'E', 'C', 'A', 'P'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint32_t kMaxRecord = 64u << 20;  // far above any BPF ring record

template <typename T>
void put(std::FILE* f, T v) {
  std::fwrite(&v, sizeof(v), 1, f);
}
void put_str(std::FILE* f, const std::string& s) {
  put<std::uint16_t>(f, static_cast<std::uint16_t>(s.size()));
  std::fwrite(s.data(), 1, s.size(), f);
}

}  // namespace

CaptureWriter::CaptureWriter(const std::string& path, const std::vector<CaptureRing>& rings)
    : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_)
    throw std::runtime_error(
        fmt::format("cannot create capture file {}: {}", path, std::strerror(errno)));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  std::fwrite(kMagic, 1, sizeof(kMagic), f_);
  put(f_, kFormatVersion);
  put(f_, static_cast<std::uint32_t>(rings.size()));
  for (const auto& r : rings) {
    put_str(f_, r.instance);
    put_str(f_, r.ring);
    put(f_, r.record_type);
    put(f_, r.record_version);
    put(f_, r.min_len);
    put(f_, r.max_len);
  }
}

CaptureWriter::~CaptureWriter() {
  close();
}

void CaptureWriter::append(std::uint32_t ring, const void* data, std::uint32_t len,
                           std::uint64_t read_ns) {
  if (!f_ || failed_) return;
  put(f_, ring);
  put(f_, len);
  put(f_, read_ns);
  if (std::fwrite(data, 1, len, f_) != len) failed_ = true;
  ++records_;
}

std::string CaptureWriter::close() {
  if (!f_) return {};
  bool bad = failed_ || std::ferror(f_);
  bad |= std::fclose(f_) != 0;
  f_ = nullptr;
  return bad ? fmt::format("writing capture file {} failed (disk full?)", path_) : std::string{};
}

CaptureReader::CaptureReader(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_)
    throw std::runtime_error(
        fmt::format("cannot open capture file {}: {}", path, std::strerror(errno)));
  auto bad = [&](const std::string& why) {
    return std::runtime_error(fmt::format("{}: not a usable loupe capture: {}", path, why));
  };
  char magic[8];
  std::uint32_t version = 0, n = 0;
  if (std::fread(magic, 1, 8, f_) != 8 || std::memcmp(magic, kMagic, 8) != 0)
    throw bad("bad magic");
  if (std::fread(&version, 4, 1, f_) != 1 || std::fread(&n, 4, 1, f_) != 1)
    throw bad("truncated header");
  if (version != kFormatVersion)
    throw bad(fmt::format("format version {}, this loupe reads {}", version, kFormatVersion));
  if (n > 4096) throw bad(fmt::format("{} rings in the header", n));
  auto get_str = [&](std::string* s) {
    std::uint16_t len = 0;
    if (std::fread(&len, 2, 1, f_) != 1) return false;
    s->resize(len);
    return len == 0 || std::fread(s->data(), 1, len, f_) == len;
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    CaptureRing r;
    if (!get_str(&r.instance) || !get_str(&r.ring) || std::fread(&r.record_type, 2, 1, f_) != 1 ||
        std::fread(&r.record_version, 2, 1, f_) != 1 || std::fread(&r.min_len, 4, 1, f_) != 1 ||
        std::fread(&r.max_len, 4, 1, f_) != 1)
      throw bad("truncated ring table");
    rings_.push_back(std::move(r));
  }
}

CaptureReader::~CaptureReader() {
  if (f_) std::fclose(f_);
}

bool CaptureReader::next(Record* out) {
  std::uint32_t ring = 0, len = 0;
  std::size_t got = std::fread(&ring, 4, 1, f_);
  if (got != 1) return false;
  if (std::fread(&len, 4, 1, f_) != 1 || std::fread(&out->read_ns, 8, 1, f_) != 1)
    throw std::runtime_error(fmt::format("{}: record {} truncated", path_, index_));
  if (ring >= rings_.size())
    throw std::runtime_error(
        fmt::format("{}: record {} names ring {} of {}", path_, index_, ring, rings_.size()));
  if (len > kMaxRecord)
    throw std::runtime_error(fmt::format("{}: record {} claims {} bytes", path_, index_, len));
  out->ring = ring;
  out->bytes.resize(len);
  if (len && std::fread(out->bytes.data(), 1, len, f_) != len)
    throw std::runtime_error(fmt::format("{}: record {} truncated", path_, index_));
  ++index_;
  return true;
}

}  // namespace loupe
