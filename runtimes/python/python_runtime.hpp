// SPDX-License-Identifier: Apache-2.0
//
// What the kernel side needs to name the Python functions of an unmodified, running CPython:
// read once per file that holds an interpreter (a python executable with libpython linked
// in, as Debian's, or libpython3.X.so), from its ELF alone, so a process that is already gone
// or never started its interpreter costs nothing more.
//   - Py_Version: which layout table entry applies (an unsupported version is said, and the
//     process keeps its native frames);
//   - _PyRuntime and, in it, the pthread key (autoTSSkey) under which every thread keeps its
//     PyThreadState: a thread that released the GIL (blocked in I/O, off the CPU) is found
//     too, which _PyRuntime's "current thread state" would not give;
//   - the code ranges of _PyEval_EvalFrameDefault, its compiler-split ".cold" part included:
//     each activation of the evaluation loop on the native stack is where its Python frames
//     go (mixed mode: C extension frames stay where they ran).
// Offsets are those of x86-64 release builds (the Python frames issue's table: OpenTelemetry's
// profiler, py-spy and Parca's runtime data agree, and the local 3.11 was checked against its
// own type objects).
#ifndef LOUPE_RUNTIMES_PYTHON_PYTHON_RUNTIME_HPP
#define LOUPE_RUNTIMES_PYTHON_PYTHON_RUNTIME_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "symbols/process_maps.hpp"
#include "util/result.hpp"

namespace loupe {

// One CPython minor version's layout: byte offsets into its structures.
struct PythonLayout {
  std::uint32_t major, minor;
  std::uint32_t runtime_tss_key;  // _PyRuntime -> gilstate.autoTSSkey._key (a pthread_key_t)
  std::uint32_t tstate_frame;     // PyThreadState -> cframe (3.11, 3.12) or frame (3.10)
  std::uint32_t cframe_current;   // _PyCFrame -> current_frame (UINT32_MAX: no cframe, 3.10)
  std::uint32_t frame_code;       // frame -> f_code
  std::uint32_t frame_previous;   // frame -> previous (f_back in 3.10)
  std::uint32_t frame_instr;      // frame -> prev_instr (3.11+) or f_lasti (3.10, an int)
  std::uint32_t frame_entry;      // frame -> is_entry (3.11) or owner (3.12); 0 = none
  std::uint32_t code_firstlineno, code_filename, code_name, code_qualname, code_linetable;
  std::uint32_t code_adaptive;  // start of the bytecode in the code object (3.11+); 0 = 3.10
  std::uint32_t ascii_data;     // compact ASCII string: where its characters start
  std::uint32_t compact_data;   // compact non-ASCII string: where its code units start
};

// The layout for `major`.`minor`, or nullptr when loupe has none.
const PythonLayout* python_layout(std::uint32_t major, std::uint32_t minor);

struct CodeRange {
  std::uint64_t start, end;  // link-time addresses, [start, end)
};

struct PythonRuntime {
  std::string path;                      // the file: python, or libpython3.X.so
  std::uint32_t hexversion = 0;          // Py_Version: 0x030b02f0 is 3.11.2 final
  std::uint64_t runtime = 0;             // _PyRuntime, link-time
  std::vector<CodeRange> eval;           // _PyEval_EvalFrameDefault, then its .cold part(s)
  const PythonLayout* layout = nullptr;  // nullptr: a version loupe has no layout for
  std::string unsupported;  // with no layout for a supported version: why (3.13+: its debug
                            // offsets unreadable, a free-threaded build)

  std::uint32_t major() const { return hexversion >> 24; }
  std::uint32_t minor() const { return (hexversion >> 16) & 0xff; }
  std::uint32_t micro() const { return (hexversion >> 8) & 0xff; }
  std::string version() const;  // "3.11.2"
};

// A code object of a running interpreter, read from its process's memory: what a Python
// frame of a stack is named by. The line table stays raw; python_line() decodes it.
struct PythonCode {
  std::string qualname;  // co_qualname (3.11+), co_name before
  std::string filename;
  std::uint32_t firstlineno = 0;
  std::string linetable;  // co_linetable's bytes
};
Result<PythonCode> read_python_code(int pid, std::uint64_t code, const PythonLayout& layout);

// The source line of the instruction at code unit `index` (3.11+: 2-byte units from the
// start of the bytecode), from the location table as CPython's own decoder reads it; 0 when
// the table has no line there.
std::uint32_t python_line(const PythonCode& code, std::uint32_t index, const PythonLayout& layout);

// Reads the interpreter in the ELF file `path`. An error when the file holds none (no
// _PyRuntime, no Py_Version or no evaluation loop): most files a process maps.
Result<PythonRuntime> read_python_runtime(const std::string& path);

// A process's interpreter where it is loaded: the file's link-time addresses moved by the
// mapping's load bias (0 for a non-PIE python; a libpython's wherever ld.so put it).
struct PythonProcess {
  PythonRuntime runtime;  // link-time
  std::uint64_t bias = 0;
  std::uint64_t runtime_addr() const { return runtime.runtime + bias; }
  // Where the thread-state key lives (0: no layout for this version).
  std::uint64_t tss_key_addr() const {
    return runtime.layout ? runtime_addr() + runtime.layout->runtime_tss_key : 0;
  }
  std::vector<CodeRange> eval() const;  // the evaluation loop's ranges, loaded
};

// What read_python_runtime found in each file, by (device, inode): a file is read once
// however many processes map it (nullptr: not an interpreter).
using PythonRuntimeCache =
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::shared_ptr<const PythonRuntime>>;

// The interpreter process `pid` runs, found in its maps (as the session's ProcessWatch
// read them; files opened through `proc_root`, e.g. "/proc"). An error when it maps none.
Result<PythonProcess> find_python_process(const std::string& proc_root, std::uint32_t pid,
                                          const std::vector<MapsEntry>& maps,
                                          PythonRuntimeCache* cache = nullptr);

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_PYTHON_PYTHON_RUNTIME_HPP
