// SPDX-License-Identifier: Apache-2.0
//
// A diagnostic command run in a live HotSpot JVM through its own dynamic-attach mechanism,
// as `jcmd PID <command>` does, without jcmd (it may be absent, and starting a JVM for it
// takes seconds). loupe uses it for Compiler.perfmap (JDK 17+): the JVM then writes
// /tmp/perf-<its pid>.map, which the symbolizer reads, so JIT frames get method names.
//
// The protocol (src/hotspot/os/linux/attachListener_linux.cpp and the JDK's
// sun/tools/attach/VirtualMachineImpl.java): when <the JVM's /tmp>/.java_pid<nspid> is
// not a socket yet, the file .attach_pid<nspid> in the JVM's cwd (else its /tmp) and a
// SIGQUIT make it start its attach listener, which binds that socket. A request is
// "1\0jcmd\0<command>\0\0\0" (protocol 1, the operation, its three arguments: the jcmd
// line and two empty ones); the answer
// is a status line ("0" = done) and the command's output, then the JVM closes.
// The listener serves a peer whose euid is root or whose euid and egid are its own.
#ifndef LOUPE_RUNTIMES_HOTSPOT_JVM_ATTACH_HPP
#define LOUPE_RUNTIMES_HOTSPOT_JVM_ATTACH_HPP

#include <chrono>
#include <cstdint>
#include <string>

#include "util/result.hpp"

namespace loupe {

// Why a request got no answer (Error::code of jvm_command()).
enum class JvmAttachError {
  kGone = 1,  // the process is gone
  kDisabled,  // started with -XX:+DisableAttachMechanism: it would print a thread dump
  kNotReady,  // it does not catch SIGQUIT (yet: a JVM starting, or for good with -Xrs)
  kTimeout,   // no listener, or no answer, within the bound
  kRefused,   // the socket or the attach file cannot be reached, or the JVM hung up
  kFailed,    // it answered with an error (an old JDK: "Unknown diagnostic command")
};

struct JvmAttachOptions {
  std::string proc_root = "/proc";
  // Bounds the whole request: the listener's start, the connection and the answer.
  std::chrono::milliseconds timeout{3000};
  // Connect from a helper process holding the JVM's euid/egid even where this process's
  // credentials would do (tests of that path). Otherwise only where they would not: not
  // its owner, and not root in its user namespace (the JVM would see an unmapped uid).
  bool connect_as_owner = false;
};

struct JvmAnswer {
  std::string output;             // what the command printed
  bool started_listener = false;  // this request started the JVM's attach listener
  bool through_helper = false;    // connected from a helper holding the JVM's credentials
  std::chrono::microseconds took{0};
};

// Runs `command` ("Compiler.perfmap") in the JVM `pid`, bounded by opts.timeout. Never
// signals a process that does not catch SIGQUIT (its default action would kill it).
Result<JvmAnswer> jvm_command(std::uint32_t pid, const std::string& command,
                              const JvmAttachOptions& opts = {});

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_HOTSPOT_JVM_ATTACH_HPP
