// SPDX-License-Identifier: Apache-2.0
//
// Block device names from sysfs (/sys/class/block/<name>/dev), keyed by the kernel's
// dev_t encoding (major << 20 | minor) that the block tracepoints and struct gendisk use.
#ifndef LOUPE_BIOLAT_DEVICE_NAMES_HPP
#define LOUPE_BIOLAT_DEVICE_NAMES_HPP

#include <cstdint>
#include <map>
#include <string>

namespace loupe::biolat {

constexpr std::uint32_t kernel_dev(std::uint32_t major, std::uint32_t minor) {
  return (major << 20) | minor;
}
constexpr std::uint32_t dev_major(std::uint32_t dev) {
  return dev >> 20;
}
constexpr std::uint32_t dev_minor(std::uint32_t dev) {
  return dev & ((1u << 20) - 1);
}
std::string dev_string(std::uint32_t dev);  // "254:0"

class DeviceNames {
 public:
  // Reads `sysfs_block` (a /sys/class/block-like folder) now; devices that appear later
  // are looked up again on a miss.
  explicit DeviceNames(std::string sysfs_block = "/sys/class/block");

  // "vda" for a known device, else "major:minor".
  std::string name(std::uint32_t dev);

  // A device filter: a name ("vda", "/dev/vda") or "major:minor". Requests belong to
  // whole disks, so a partition is refused with the disk to use instead.
  // Throws std::invalid_argument with the reason.
  std::uint32_t resolve(const std::string& spec);

  // Every partition's dev_t and its disk's, as sysfs shows them now.
  std::map<std::uint32_t, std::uint32_t> partition_disks() const;

 private:
  void scan();

  std::string root_;
  std::map<std::uint32_t, std::string> names_;
};

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_DEVICE_NAMES_HPP
