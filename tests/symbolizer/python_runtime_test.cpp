// SPDX-License-Identifier: Apache-2.0
//
// read_python_runtime() on Debian's own interpreter, held to what that interpreter says of
// itself when it runs: its version, where _PyRuntime and the evaluation loop are, and that
// the pthread key at the layout's offset gives each thread its own PyThreadState.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "symbols/python_runtime.hpp"

namespace {

const char* const kPython = "/usr/bin/python3.11";

// name=value lines printed by `python -c code`.
std::map<std::string, std::string> ask(const std::string& code) {
  std::map<std::string, std::string> out;
  FILE* p = ::popen((std::string(kPython) + " -c '" + code + "'").c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof(line), p)) {
    std::string s(line);
    const auto eq = s.find('=');
    if (eq == std::string::npos) continue;
    out[s.substr(0, eq)] = s.substr(eq + 1, s.find_last_not_of("\n") - eq);
  }
  ::pclose(p);
  return out;
}

TEST(PythonRuntime, DebiansInterpreterIsReadFromItsFileAsItSaysWhenItRuns) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
  auto rt = loupe::read_python_runtime(kPython);
  ASSERT_TRUE(rt) << rt.error();
  // The running interpreter: its version, and (a non-PIE executable: load bias 0) its
  // addresses; the key's thread state against the one the interpreter gives its thread.
  const std::string key_off = rt->layout ? std::to_string(rt->layout->runtime_tss_key) : "0";
  auto own =
      ask("import sys, ctypes\n"
          "api = ctypes.pythonapi\n"
          "rt = ctypes.addressof(ctypes.c_char.in_dll(api, \"_PyRuntime\"))\n"
          "ev = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value\n"
          "key = ctypes.c_uint.from_address(rt + " +
          key_off +
          ").value\n"
          "libc = ctypes.CDLL(None)\n"
          "libc.pthread_getspecific.restype = ctypes.c_void_p\n"
          "api.PyGILState_GetThisThreadState.restype = ctypes.c_void_p\n"
          "print(\"hexversion=%d\" % sys.hexversion)\n"
          "print(\"runtime=%d\" % rt)\n"
          "print(\"eval=%d\" % ev)\n"
          "print(\"by_key=%d\" % (libc.pthread_getspecific(key) or 0))\n"
          "print(\"tstate=%d\" % api.PyGILState_GetThisThreadState())\n");
  ASSERT_EQ(own.size(), 5u) << "the interpreter did not answer";
  EXPECT_EQ(rt->hexversion, std::stoul(own["hexversion"]));
  EXPECT_EQ(rt->version(), "3.11." + std::to_string((std::stoul(own["hexversion"]) >> 8) & 0xff));
  ASSERT_NE(rt->layout, nullptr) << "3.11 has a layout";
  EXPECT_EQ(rt->runtime, std::stoull(own["runtime"]));
  ASSERT_FALSE(rt->eval.empty());
  EXPECT_EQ(rt->eval[0].start, std::stoull(own["eval"]));
  // The thread state under the key at the layout's offset is the thread's own.
  EXPECT_NE(own["tstate"], "0");
  EXPECT_EQ(own["by_key"], own["tstate"]);
  // Debian's build splits the loop: its .cold part is elsewhere, and unnamed.
  ASSERT_GE(rt->eval.size(), 2u) << "no .cold part found";
  for (std::size_t i = 1; i < rt->eval.size(); ++i) {
    EXPECT_TRUE(rt->eval[i].end <= rt->eval[0].start || rt->eval[i].start >= rt->eval[0].end);
    EXPECT_GT(rt->eval[i].end, rt->eval[i].start);
  }
  std::printf("  %s %s: _PyRuntime 0x%llx, eval", kPython, rt->version().c_str(),
              (unsigned long long)rt->runtime);
  for (const auto& r : rt->eval)
    std::printf(" [0x%llx, 0x%llx)", (unsigned long long)r.start, (unsigned long long)r.end);
  std::printf("\n");
}

TEST(PythonRuntime, AFileWithoutAnInterpreterSaysSo) {
  auto rt = loupe::read_python_runtime("/bin/true");
  ASSERT_FALSE(rt);
  EXPECT_NE(rt.error().find("no CPython interpreter"), std::string::npos) << rt.error();
  EXPECT_FALSE(loupe::read_python_runtime("/nonexistent/python"));
}

TEST(PythonRuntime, LayoutsExistFor310To312AndNotOtherwise) {
  for (std::uint32_t minor : {10u, 11u, 12u}) EXPECT_NE(loupe::python_layout(3, minor), nullptr);
  EXPECT_EQ(loupe::python_layout(3, 9), nullptr);
  EXPECT_EQ(loupe::python_layout(2, 7), nullptr);
}

}  // namespace
