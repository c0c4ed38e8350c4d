// SPDX-License-Identifier: Apache-2.0
#include "device_names.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace loupe::biolat {
namespace {

bool parse_major_minor(const std::string& s, std::uint32_t* out) {
  auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= s.size()) return false;
  try {
    std::size_t a = 0, b = 0;
    unsigned long ma = std::stoul(s.substr(0, colon), &a);
    unsigned long mi = std::stoul(s.substr(colon + 1), &b);
    if (a != colon || b != s.size() - colon - 1 || ma >= (1ul << 12) || mi >= (1ul << 20))
      return false;
    *out = kernel_dev(static_cast<std::uint32_t>(ma), static_cast<std::uint32_t>(mi));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string dev_string(std::uint32_t dev) {
  return std::to_string(dev_major(dev)) + ":" + std::to_string(dev_minor(dev));
}

DeviceNames::DeviceNames(std::string sysfs_block) : root_(std::move(sysfs_block)) {
  scan();
}

void DeviceNames::scan() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    std::ifstream in(entry.path() / "dev");
    std::string line;
    std::uint32_t dev = 0;
    if (std::getline(in, line) && parse_major_minor(line, &dev))
      names_[dev] = entry.path().filename().string();
  }
}

std::string DeviceNames::name(std::uint32_t dev) {
  auto it = names_.find(dev);
  if (it == names_.end()) {
    scan();  // hot-plugged (a loop device set up after start)
    it = names_.find(dev);
  }
  return it != names_.end() ? it->second : dev_string(dev);
}

std::map<std::uint32_t, std::uint32_t> DeviceNames::partition_disks() const {
  std::map<std::uint32_t, std::uint32_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    if (!fs::exists(entry.path() / "partition")) continue;
    // /sys/class/block/<part> links into .../<disk>/<part>: the parent folder is the disk.
    std::error_code cec;
    const fs::path real = fs::canonical(entry.path(), cec);
    if (cec) continue;
    std::ifstream pin(entry.path() / "dev"), din(real.parent_path() / "dev");
    std::string pline, dline;
    std::uint32_t part = 0, disk = 0;
    if (std::getline(pin, pline) && parse_major_minor(pline, &part) && std::getline(din, dline) &&
        parse_major_minor(dline, &disk))
      out[part] = disk;
  }
  return out;
}

std::uint32_t DeviceNames::resolve(const std::string& spec) {
  if (spec.empty()) throw std::invalid_argument("empty device name");
  std::uint32_t dev = 0;
  std::string name;
  if (parse_major_minor(spec, &dev)) {
    name = this->name(dev);
    if (name == spec) return dev;  // unknown to sysfs now: may appear later (loop devices)
  } else {
    name = spec.rfind("/dev/", 0) == 0 ? spec.substr(5) : spec;
    if (name.find('/') != std::string::npos)
      throw std::invalid_argument("device '" + spec +
                                  "': expected a name such as vda or major:minor");
    std::ifstream in(fs::path(root_) / name / "dev");
    std::string line;
    if (!std::getline(in, line) || !parse_major_minor(line, &dev))
      throw std::invalid_argument("device '" + spec + "': no such block device in " + root_);
  }
  if (fs::exists(fs::path(root_) / name / "partition")) {
    // /sys/class/block/<part> links into .../<disk>/<part>: the parent folder is the disk.
    std::error_code ec;
    auto real = fs::canonical(fs::path(root_) / name, ec);
    std::string disk = ec ? std::string("its disk") : real.parent_path().filename().string();
    throw std::invalid_argument("device '" + spec +
                                "' is a partition; block requests are "
                                "counted per disk: filter on " +
                                disk);
  }
  return dev;
}

}  // namespace loupe::biolat
