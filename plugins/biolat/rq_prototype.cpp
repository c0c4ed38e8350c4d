// SPDX-License-Identifier: Apache-2.0
#include "rq_prototype.hpp"

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

namespace loupe::biolat {

std::optional<int> tracepoint_pointer_arg(const char* tracepoint, const char* type,
                                          std::string* why) {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) {
    if (why) *why = std::string("no kernel BTF: ") + std::strerror(errno);
    return std::nullopt;
  }
  // DECLARE_TRACE emits `typedef void (*btf_trace_<tp>)(void *__data, <args...>)`.
  std::string name = std::string("btf_trace_") + tracepoint;
  std::optional<int> result;
  int id = btf__find_by_name_kind(vmlinux, name.c_str(), BTF_KIND_TYPEDEF);
  const btf_type* t = id > 0 ? btf__type_by_id(vmlinux, id) : nullptr;
  if (t) t = btf__type_by_id(vmlinux, t->type);                   // pointer
  if (t && btf_is_ptr(t)) t = btf__type_by_id(vmlinux, t->type);  // function prototype
  if (t && btf_is_func_proto(t)) {
    const btf_param* params = btf_params(t);
    int n = btf_vlen(t);
    // The first struct <type> * after __data.
    for (int i = 1; i < n && !result; ++i) {
      const btf_type* p = btf__type_by_id(vmlinux, params[i].type);
      if (!p || !btf_is_ptr(p)) continue;
      const btf_type* pointee = btf__type_by_id(vmlinux, p->type);
      const char* pname = pointee ? btf__name_by_offset(vmlinux, pointee->name_off) : nullptr;
      if (pname && std::strcmp(pname, type) == 0) result = i - 1;
    }
    if (!result && why) *why = name + " has no struct " + type + " * argument";
  } else if (why) {
    *why = name + " not found in the kernel BTF";
  }
  btf__free(vmlinux);
  return result;
}

std::optional<bool> rq_tracepoint_single_arg(const char* tracepoint, std::string* why) {
  auto arg = tracepoint_pointer_arg(tracepoint, "request", why);
  if (!arg) return std::nullopt;
  return *arg == 0;
}

}  // namespace loupe::biolat
