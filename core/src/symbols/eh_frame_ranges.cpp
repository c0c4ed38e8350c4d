// SPDX-License-Identifier: Apache-2.0
#include "symbols/eh_frame_ranges.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace loupe {
namespace {

// DW_EH_PE_* pointer encodings (LSB, "Exception Frames").
constexpr std::uint8_t kOmit = 0xff;
constexpr std::uint8_t kFormatMask = 0x0f;
constexpr std::uint8_t kApplyMask = 0x70;
constexpr std::uint8_t kPcRel = 0x10;

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size, std::size_t pos)
      : data_(data), size_(size), pos_(pos) {}

  bool ok() const { return ok_; }
  std::size_t pos() const { return pos_; }

  template <typename T>
  T fixed() {
    T v{};
    if (pos_ + sizeof(T) > size_) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::uint64_t uleb() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      auto b = fixed<std::uint8_t>();
      if (!ok_) return 0;
      v |= std::uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  std::int64_t sleb() {
    std::int64_t v = 0;
    unsigned shift = 0;
    std::uint8_t b = 0;
    do {
      b = fixed<std::uint8_t>();
      if (!ok_ || shift >= 64) {
        ok_ = false;
        return 0;
      }
      v |= static_cast<std::int64_t>(std::uint64_t{b & 0x7fu} << shift);
      shift += 7;
    } while (b & 0x80);
    // Sign extension: every bit from `shift` up (written unsigned: at shift 63 the signed
    // -(1 << 63) overflows, which the fuzzer found).
    if (shift < 64 && (b & 0x40)) v |= static_cast<std::int64_t>(~std::uint64_t{0} << shift);
    return v;
  }
  const char* cstring() {
    const auto* start = data_ + pos_;
    const void* nul = std::memchr(start, 0, size_ - std::min(pos_, size_));
    if (!nul) {
      ok_ = false;
      return "";
    }
    pos_ = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - data_) + 1;
    return reinterpret_cast<const char*>(start);
  }
  // A pointer in encoding `enc`; `section_vaddr` turns pc-relative values absolute.
  std::uint64_t encoded(std::uint8_t enc, std::uint64_t section_vaddr) {
    const std::uint64_t field = section_vaddr + pos_;
    std::uint64_t v = 0;
    switch (enc & kFormatMask) {
      case 0x00: v = fixed<std::uint64_t>(); break;  // absptr (LP64)
      case 0x01: v = uleb(); break;
      case 0x02: v = fixed<std::uint16_t>(); break;
      case 0x03: v = fixed<std::uint32_t>(); break;
      case 0x04: v = fixed<std::uint64_t>(); break;
      case 0x09: v = static_cast<std::uint64_t>(sleb()); break;
      case 0x0a:
        v = static_cast<std::uint64_t>(static_cast<std::int64_t>(fixed<std::int16_t>()));
        break;
      case 0x0b:
        v = static_cast<std::uint64_t>(static_cast<std::int64_t>(fixed<std::int32_t>()));
        break;
      case 0x0c: v = fixed<std::uint64_t>(); break;
      default: ok_ = false; return 0;
    }
    if ((enc & kApplyMask) == kPcRel)
      v += field;
    else if ((enc & kApplyMask) != 0)
      ok_ = false;  // datarel/textrel/funcrel: not in .eh_frame FDEs
    return v;
  }
  void seek(std::size_t pos) { pos_ = pos; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_;
  bool ok_ = true;
};

// The FDE pointer encoding ('R' augmentation) of the CIE at `offset`; kOmit when the
// CIE cannot be read.
std::uint8_t cie_fde_encoding(const std::uint8_t* data, std::size_t size, std::size_t offset,
                              std::uint64_t section_vaddr) {
  Reader r(data, size, offset);
  std::uint64_t length = r.fixed<std::uint32_t>();
  if (length == 0xffffffffu) return kOmit;          // 64-bit entries do not occur in .eh_frame
  if (r.fixed<std::uint32_t>() != 0) return kOmit;  // not a CIE
  const auto version = r.fixed<std::uint8_t>();
  const char* aug = r.cstring();
  if (!r.ok()) return kOmit;
  if (std::strstr(aug, "eh")) r.fixed<std::uint64_t>();
  r.uleb();  // code alignment
  r.sleb();  // data alignment
  if (version == 1)
    r.fixed<std::uint8_t>();
  else
    r.uleb();            // return address register
  std::uint8_t enc = 0;  // absptr unless 'R' says otherwise
  if (aug[0] != 'z') return r.ok() ? enc : kOmit;
  r.uleb();  // augmentation data length
  for (const char* a = aug + 1; *a && r.ok(); ++a) {
    if (*a == 'R') {
      enc = r.fixed<std::uint8_t>();
      break;
    } else if (*a == 'P') {
      auto penc = r.fixed<std::uint8_t>();
      r.encoded(static_cast<std::uint8_t>(penc & ~0x80), section_vaddr);
    } else if (*a == 'L') {
      r.fixed<std::uint8_t>();
    } else if (*a != 'S' && *a != 'B') {
      return kOmit;  // an augmentation we cannot skip
    }
  }
  return r.ok() ? enc : kOmit;
}

}  // namespace

std::vector<FdeRange> parse_eh_frame_ranges(const std::uint8_t* data, std::size_t size,
                                            std::uint64_t section_vaddr) {
  std::vector<FdeRange> out;
  std::unordered_map<std::size_t, std::uint8_t> cies;
  std::size_t off = 0;
  while (off + 8 <= size) {
    Reader r(data, size, off);
    std::uint64_t length = r.fixed<std::uint32_t>();
    if (length == 0) break;  // terminator
    if (length == 0xffffffffu) break;
    const std::size_t body = r.pos();
    if (length > size - body) break;
    const std::size_t next = body + length;
    const auto id = r.fixed<std::uint32_t>();
    if (id != 0 && id <= body) {
      const std::size_t cie_off = body - id;
      auto it = cies.find(cie_off);
      if (it == cies.end())
        it = cies.emplace(cie_off, cie_fde_encoding(data, size, cie_off, section_vaddr)).first;
      const std::uint8_t enc = it->second;
      if (enc != kOmit) {
        Reader f(data, next, r.pos());
        std::uint64_t start = f.encoded(enc, section_vaddr);
        std::uint64_t range = f.encoded(enc & kFormatMask, section_vaddr);
        if (f.ok() && start != 0 && range != 0) out.push_back({start, start + range});
      }
    }
    off = next;
  }
  std::sort(out.begin(), out.end(),
            [](const FdeRange& a, const FdeRange& b) { return a.start < b.start; });
  return out;
}

}  // namespace loupe
