// SPDX-License-Identifier: Apache-2.0
//
// Names the calling thread (its /proc/PID/task/TID/comm, as top -H, perf and ps -L show
// it). loupe's cost is checked from outside per thread: with every thread called "loupe",
// which part costs (the ring reader, the table builder, a sink, a plugin's warmer) could
// not be told apart. The kernel keeps 15 characters; the rest is cut.
#ifndef LOUPE_SDK_THREAD_NAME_HPP
#define LOUPE_SDK_THREAD_NAME_HPP

#include <pthread.h>

#include <string>

namespace loupe::sdk {

inline void name_this_thread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_THREAD_NAME_HPP
