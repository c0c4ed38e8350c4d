// SPDX-License-Identifier: Apache-2.0
//
// read_python_runtime() on Debian's own interpreter, held to what that interpreter says of
// itself when it runs: its version, where _PyRuntime and the evaluation loop are, and that
// the pthread key at the layout's offset gives each thread its own PyThreadState.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <vector>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "python/python_runtime.hpp"

namespace {

const char* const kPython = "/usr/bin/python3.11";

// name=value lines printed by `python -c code`.
std::map<std::string, std::string> ask(const std::string& code,
                                       const std::string& python = kPython) {
  std::map<std::string, std::string> out;
  FILE* p = ::popen((python + " -c '" + code + "'").c_str(), "r");
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

// Code objects of a running 3.11: names, file and every instruction's line, read from its
// memory, against what the interpreter says of the same objects (id() is the address;
// co_lines() gives each byte range's line).
TEST(PythonRuntime, CodeObjectsOfARunningInterpreterGiveTheirNamesAndLines) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
  if (::geteuid() != 0) GTEST_SKIP() << "reads another process's memory: needs root";
  auto rt = loupe::read_python_runtime(kPython);
  ASSERT_TRUE(rt && rt->layout) << (rt ? "no layout" : rt.error());
  // Non-ASCII names too (PEP 393's compact UCS-1/2 strings): the reader turns them to UTF-8.
  const std::string script = "/tmp/loupe-python-runtime-test-" + std::to_string(::getpid()) + ".py";
  std::ofstream(script) << R"(import os, sys, time
def outer(x):
    y = x + 1
    for i in range(3):
        y += i
    return inner(y)
def inner(z):
    return [z * k
            for k in range(2)]
class Knot:
    def té(self, v=1):
        return v
class Ж:
    def ш(self):
        return 2
print("pid=%d" % os.getpid())
for f in (outer, inner, Knot.té, Ж.ш):
    c = f.__code__
    print("code=%d %s %s" % (id(c), c.co_qualname, c.co_filename))
    for start, end, line in c.co_lines():
        if line is not None: print("line=%d %d %d %d" % (id(c), start, end, line))
print("done")
sys.stdout.flush()
time.sleep(60)
)";
  FILE* p = ::popen((std::string("PYTHONIOENCODING=utf-8 ") + kPython + " " + script).c_str(), "r");
  ASSERT_NE(p, nullptr);
  long pid = 0;
  std::map<std::uint64_t, std::pair<std::string, std::string>> codes;  // id -> qualname, file
  std::vector<std::array<std::uint64_t, 4>> lines;                     // id, start, end, line
  char buf[1024];
  while (std::fgets(buf, sizeof(buf), p) && std::string(buf) != "done\n") {
    std::istringstream in(buf);
    std::string tag;
    std::getline(in, tag, '=');
    if (tag == "pid") {
      in >> pid;
    } else if (tag == "code") {
      std::uint64_t id;
      std::string q, f;
      in >> id >> q >> f;
      codes[id] = {q, f};
    } else if (tag == "line") {
      std::array<std::uint64_t, 4> l{};
      in >> l[0] >> l[1] >> l[2] >> l[3];
      lines.push_back(l);
    }
  }
  ASSERT_GT(pid, 0);
  ASSERT_EQ(codes.size(), 4u);
  for (const auto& [id, names] : codes) {
    auto code = loupe::read_python_code(static_cast<int>(pid), id, *rt->layout);
    ASSERT_TRUE(code) << code.error();
    EXPECT_EQ(code->qualname, names.first);
    EXPECT_EQ(code->filename, names.second);
    std::size_t checked = 0;
    for (const auto& l : lines) {
      if (l[0] != id) continue;
      for (std::uint64_t at = l[1]; at < l[2]; at += 2, ++checked)
        EXPECT_EQ(loupe::python_line(*code, static_cast<std::uint32_t>(at / 2), *rt->layout), l[3])
            << names.first << " at byte " << at;
    }
    EXPECT_GT(checked, 0u) << names.first;
    std::printf("  %s (%s): %zu instructions' lines checked\n", code->qualname.c_str(),
                code->filename.c_str(), checked);
  }
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  ::pclose(p);
  std::remove(script.c_str());
}

// A running interpreter found from its maps, where it was loaded: Debian's python3.11
// (non-PIE, libpython linked in) and, when PATH has another one (a pyenv build here: a PIE
// python on a shared libpython3.X.so), that one too; against the interpreter's own ctypes.
TEST(PythonRuntime, RunningInterpretersAreFoundWhereTheyWereLoaded) {
  if (::geteuid() != 0) GTEST_SKIP() << "reads another process's maps and root: needs root";
  std::vector<std::string> pythons;
  if (::access(kPython, X_OK) == 0) pythons.push_back(kPython);
  if (FILE* p = ::popen("python3 -c 'import sys; print(sys.executable)' 2>/dev/null", "r")) {
    char buf[512] = {};
    if (std::fgets(buf, sizeof(buf), p)) {
      std::string exe(buf, std::strcspn(buf, "\n"));
      if (!exe.empty() && exe != kPython) pythons.push_back(exe);
    }
    ::pclose(p);
  }
  if (pythons.empty()) GTEST_SKIP() << "no python here";
  const std::string script = "/tmp/loupe-python-process-test-" + std::to_string(::getpid()) + ".py";
  std::ofstream(script) << R"(import ctypes, os, sys, time
api = ctypes.pythonapi
rt = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
ev = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
print("pid=%d runtime=%d eval=%d version=%d" % (os.getpid(), rt, ev, sys.hexversion))
sys.stdout.flush()
time.sleep(60)
)";
  for (const auto& python : pythons) {
    SCOPED_TRACE(python);
    FILE* p = ::popen((python + " " + script).c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[512] = {};
    ASSERT_NE(std::fgets(buf, sizeof(buf), p), nullptr);
    unsigned long long pid = 0, runtime = 0, eval = 0, version = 0;
    ASSERT_EQ(std::sscanf(buf, "pid=%llu runtime=%llu eval=%llu version=%llu", &pid, &runtime,
                          &eval, &version),
              4)
        << buf;
    std::vector<loupe::MapsEntry> maps;
    int err = 0;
    ASSERT_TRUE(loupe::read_process_maps("/proc", static_cast<std::uint32_t>(pid), &maps, &err));
    auto proc = loupe::find_python_process("/proc", static_cast<std::uint32_t>(pid), maps);
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    ::pclose(p);
    ASSERT_TRUE(proc) << proc.error();
    EXPECT_EQ(proc->runtime.hexversion, version);
    EXPECT_EQ(proc->runtime_addr(), runtime);
    ASSERT_FALSE(proc->eval().empty());
    EXPECT_EQ(proc->eval()[0].start, eval);
    std::printf("  %s: %s %s, bias 0x%llx, _PyRuntime 0x%llx\n", python.c_str(),
                proc->runtime.path.c_str(), proc->runtime.version().c_str(),
                (unsigned long long)proc->bias, (unsigned long long)proc->runtime_addr());
  }
  std::remove(script.c_str());
}

TEST(PythonRuntime, AFileWithoutAnInterpreterSaysSo) {
  auto rt = loupe::read_python_runtime("/bin/true");
  ASSERT_FALSE(rt);
  EXPECT_NE(rt.error().find("no CPython interpreter"), std::string::npos) << rt.error();
  EXPECT_FALSE(loupe::read_python_runtime("/nonexistent/python"));
}

// Every installed interpreter of a supported version (Debian's, pyenv's 3.10-3.13) against
// itself: the thread state under the layout's key is the one the interpreter gives the
// thread, and the frame chain's first link (the thread state's frame, through 3.11 and
// 3.12's cframe) holds the code object of the frame that is running. 3.13's offsets come
// from its own _Py_DebugOffsets: for a release build they are the table's.
TEST(PythonRuntime, EachInstalledVersionsLayoutHoldsInItsRunningInterpreter) {
  if (::geteuid() != 0) GTEST_SKIP() << "reads another process's memory: needs root";
  std::vector<std::pair<std::string, std::string>> found;  // (python, file with _PyRuntime)
  if (::access(kPython, X_OK) == 0) found.emplace_back(kPython, kPython);
  for (const char* v : {"3.10", "3.11", "3.12", "3.13"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/root/.pyenv/versions", ec)) {
      if (e.path().filename().string().rfind(std::string(v) + ".", 0) != 0) continue;
      const std::string exe = (e.path() / ("bin/python" + std::string(v))).string();
      const std::string lib = (e.path() / ("lib/libpython" + std::string(v) + ".so.1.0")).string();
      if (::access(exe.c_str(), X_OK) != 0) continue;
      found.emplace_back(exe, loupe::read_python_runtime(exe) ? exe : lib);
    }
  }
  if (found.size() < 2) GTEST_SKIP() << "fewer than two interpreters installed";
  for (const auto& [python, file] : found) {
    SCOPED_TRACE(python);
    auto rt = loupe::read_python_runtime(file);
    ASSERT_TRUE(rt) << rt.error();
    ASSERT_NE(rt->layout, nullptr) << rt->version() << ": " << rt->unsupported;
    const loupe::PythonLayout& l = *rt->layout;
    const std::string cframe = l.cframe_current == UINT32_MAX
                                   ? ""
                                   : "fr = ctypes.c_void_p.from_address(fr + " +
                                         std::to_string(l.cframe_current) + ").value\n";
    const std::string code =
        "import sys, ctypes\n"
        "api = ctypes.pythonapi\n"
        "rt = ctypes.addressof(ctypes.c_char.in_dll(api, \"_PyRuntime\"))\n"
        "key = ctypes.c_uint.from_address(rt + " +
        std::to_string(l.runtime_tss_key) +
        ").value\n"
        "made = ctypes.c_int.from_address(rt + " +
        std::to_string(l.runtime_tss_key - 4) +
        ").value\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.pthread_getspecific.restype = ctypes.c_void_p\n"
        "api.PyGILState_GetThisThreadState.restype = ctypes.c_void_p\n"
        "ts = api.PyGILState_GetThisThreadState()\n"
        "fr = ctypes.c_void_p.from_address(ts + " +
        std::to_string(l.tstate_frame) + ").value\n" + cframe +
        "co = ctypes.c_void_p.from_address(fr + " + std::to_string(l.frame_code) +
        ").value\n"
        "print(\"tstate=%d\" % ts)\n"
        "print(\"made=%d\" % made)\n"
        "print(\"by_key=%d\" % (libc.pthread_getspecific(key) or 0))\n"
        "print(\"code=%d\" % co)\n"
        "print(\"own_code=%d\" % id(sys._getframe().f_code))\n";
    auto own = ask(code, python);
    ASSERT_EQ(own.size(), 5u) << "the interpreter did not answer";
    // The key is Py_tss_t's second int: the first says it was made (1), as the walk checks.
    EXPECT_EQ(own["made"], "1");
    EXPECT_NE(own["tstate"], "0");
    EXPECT_EQ(own["by_key"], own["tstate"]);
    EXPECT_EQ(own["code"], own["own_code"]);
    if (rt->minor() >= 13) {
      const loupe::PythonLayout* table = loupe::python_layout(3, rt->minor());
      ASSERT_NE(table, nullptr);
      EXPECT_EQ(std::memcmp(table, &l, sizeof(l)), 0)
          << "a release build's _Py_DebugOffsets differ from the table";
    }
    std::printf("  %s (%s): CPython %s, key and frame chain as it says\n", python.c_str(),
                file.c_str(), rt->version().c_str());
  }
}

TEST(PythonRuntime, LayoutsExistFor310To313AndNotOtherwise) {
  for (std::uint32_t minor : {10u, 11u, 12u, 13u})
    EXPECT_NE(loupe::python_layout(3, minor), nullptr);
  EXPECT_EQ(loupe::python_layout(3, 9), nullptr);
  EXPECT_EQ(loupe::python_layout(2, 7), nullptr);
}

}  // namespace
