// SPDX-License-Identifier: Apache-2.0
//
// Ownership of a bpftool skeleton (`<name>.skel.h`): the object is destroyed (programs
// detached, maps and links closed) when the owner goes, on every exit path of setup().
//
//   sdk::Skeleton<latency_bpf> skel_;
//   skel_.reset(latency_bpf__open());
//
// bpftool's skeletons declare `static inline void destroy(struct X*)` inside the struct
// for C++ (libbpf 1.0+, Debian 12's bpftool included), so no per-plugin deleter is needed.
#ifndef LOUPE_SDK_SKELETON_HPP
#define LOUPE_SDK_SKELETON_HPP

#include <memory>

namespace loupe::sdk {

template <typename Skel>
struct SkeletonDeleter {
  void operator()(Skel* skel) const { Skel::destroy(skel); }
};

template <typename Skel>
using Skeleton = std::unique_ptr<Skel, SkeletonDeleter<Skel>>;

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_SKELETON_HPP
