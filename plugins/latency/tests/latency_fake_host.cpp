// SPDX-License-Identifier: Apache-2.0
#include "latency_fake_host.hpp"

#include <bpf/libbpf.h>
#include <time.h>

#include <sys/stat.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace loupe::test {
namespace {

thread_local std::string g_last_error;

template <typename T>
int get_value(const loupe_config* cfg, const char* key, T* out) {
  auto it = cfg->values.find(key);
  if (it == cfg->values.end()) return LOUPE_ERR_NOT_FOUND;
  if (auto* v = std::get_if<T>(&it->second)) {
    *out = *v;
    return LOUPE_OK;
  }
  return LOUPE_ERR_INVALID_ARG;
}

std::uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

}  // namespace

loupe_config with_schema_defaults(const loupe_plugin_descriptor& d, const loupe_config& cfg) {
  loupe_config out = cfg;
  const auto* base = reinterpret_cast<const unsigned char*>(d.config_keys);
  for (std::uint32_t i = 0; i < d.n_config_keys; ++i) {
    const auto* k = reinterpret_cast<const loupe_config_key*>(base + static_cast<std::size_t>(i) *
                                                                         d.config_key_size);
    if (!k->default_value || out.values.count(k->name)) continue;
    std::string v = k->default_value;
    switch (k->type) {
      case LOUPE_CFG_BOOL: out.values[k->name] = v == "true"; break;
      case LOUPE_CFG_INT: out.values[k->name] = static_cast<std::int64_t>(std::stoll(v)); break;
      case LOUPE_CFG_FLOAT: out.values[k->name] = std::stod(v); break;
      case LOUPE_CFG_STRING:
        out.values[k->name] = v.size() >= 2 ? v.substr(1, v.size() - 2) : v;
        break;
      default: break;
    }
  }
  return out;
}

struct FakeHostShims {
  static void log(loupe_host*, std::uint32_t, const char*) {}
  static int config_bool(const loupe_config* c, const char* k, int* out) {
    bool b = false;
    int rc = get_value(c, k, &b);
    *out = b;
    return rc;
  }
  static int config_int(const loupe_config* c, const char* k, std::int64_t* out) {
    return get_value(c, k, out);
  }
  static int config_float(const loupe_config* c, const char* k, double* out) {
    return get_value(c, k, out);
  }
  static int config_string(const loupe_config* c, const char* k, const char** out) {
    auto it = c->values.find(k);
    if (it == c->values.end()) return LOUPE_ERR_NOT_FOUND;
    auto* s = std::get_if<std::string>(&it->second);
    if (!s) return LOUPE_ERR_INVALID_ARG;
    *out = s->c_str();
    return LOUPE_OK;
  }
  static int config_list_len(const loupe_config* c, const char* k, std::uint32_t* out) {
    auto it = c->values.find(k);
    if (it == c->values.end()) return LOUPE_ERR_NOT_FOUND;
    auto* l = std::get_if<loupe_config::List>(&it->second);
    if (!l) return LOUPE_ERR_INVALID_ARG;
    *out = static_cast<std::uint32_t>(l->size());
    return LOUPE_OK;
  }
  static int config_list_string(const loupe_config*, const char*, std::uint32_t, const char**) {
    return LOUPE_ERR_NOT_FOUND;
  }
  static int config_list_int(const loupe_config*, const char*, std::uint32_t, std::int64_t*) {
    return LOUPE_ERR_NOT_FOUND;
  }
  static int config_list_table(const loupe_config* c, const char* k, std::uint32_t i,
                               const loupe_config** out) {
    auto it = c->values.find(k);
    if (it == c->values.end()) return LOUPE_ERR_NOT_FOUND;
    auto* l = std::get_if<loupe_config::List>(&it->second);
    if (!l || i >= l->size()) return LOUPE_ERR_INVALID_ARG;
    *out = &(*l)[i];
    return LOUPE_OK;
  }
  static int feature_available(loupe_host* h, const char* f, const char** reason) {
    auto& m = reinterpret_cast<FakeHost*>(h)->features;
    auto it = m.find(f);
    if (it == m.end()) return 1;
    if (reason) *reason = "forced off by the test";
    return it->second;
  }
  static int tracepoint_exists(loupe_host*, const char* name) {
    std::string s(name);
    auto colon = s.find(':');
    if (colon == std::string::npos) return 0;
    struct stat st {};
    std::string path =
        "/sys/kernel/tracing/events/" + s.substr(0, colon) + "/" + s.substr(colon + 1);
    return ::stat(path.c_str(), &st) == 0 ? 1 : 0;
  }
  static int ksym_exists(loupe_host*, const char* name) {
    std::ifstream in("/proc/kallsyms");
    std::string line;
    std::string want = std::string(" ") + name;
    while (std::getline(in, line)) {
      auto sp = line.rfind(' ');
      if (sp != std::string::npos && line.compare(sp, std::string::npos, want) == 0) return 1;
    }
    return 0;
  }
  static int bpf_load(loupe_host*, bpf_object* obj) {
    int err = bpf_object__load(obj);
    if (err) g_last_error = std::string("bpf_object__load: ") + std::strerror(-err);
    return err ? LOUPE_ERR_KERNEL : LOUPE_OK;
  }
  static int bpf_attach(loupe_host* h, bpf_program* prog, const char* probe) {
    bpf_link* l = bpf_program__attach(prog);
    return bpf_adopt_link(h, l, prog, probe, l ? 0 : errno);
  }
  static int bpf_adopt_link(loupe_host* h, bpf_link* link, bpf_program*, const char* probe, int) {
    auto* self = reinterpret_cast<FakeHost*>(h);
    self->probes.push_back(probe);
    if (link) self->links_.push_back(link);
    return LOUPE_OK;
  }
  static int ring_register(loupe_host* h, const loupe_ring_spec* spec) {
    reinterpret_cast<FakeHost*>(h)->rings_.push_back(*spec);
    return LOUPE_OK;
  }
  static int emit(loupe_host* h, const loupe_record* r) {
    CapturedRecord c;
    c.kind = r->kind;
    c.name = r->name ? r->name : "";
    for (std::uint32_t i = 0; i < r->n_labels; ++i) c.labels[r->labels[i].key] = r->labels[i].value;
    c.is_final = r->is_final;
    if (r->histogram) {
      c.buckets.assign(r->histogram->buckets, r->histogram->buckets + r->histogram->n_buckets);
      c.count = r->histogram->count;
      c.sum = r->histogram->sum;
      c.min = r->histogram->min;
      c.max = r->histogram->max;
    }
    if (r->metric) c.metric = r->metric->value;
    if (r->health) {
      c.health_value = r->health->value;
      c.severity = r->health->severity;
      c.message = r->health->message ? r->health->message : "";
    }
    if (r->event) {
      for (std::uint32_t i = 0; i < r->event->n_fields; ++i) {
        const auto& f = r->event->fields[i];
        std::string v;
        switch (f.type) {
          case LOUPE_FIELD_I64: v = std::to_string(f.v.i64); break;
          case LOUPE_FIELD_U64: v = std::to_string(f.v.u64); break;
          case LOUPE_FIELD_F64: v = std::to_string(f.v.f64); break;
          case LOUPE_FIELD_STR: v = f.v.str ? f.v.str : ""; break;
        }
        c.fields[f.key] = v;
      }
      c.n_frames = r->event->n_frames;
    }
    reinterpret_cast<FakeHost*>(h)->records.push_back(std::move(c));
    return LOUPE_OK;
  }
  static int symbolize(loupe_host*, std::uint32_t, std::uint32_t kind, const std::uint64_t* a,
                       std::uint32_t n, loupe_frame* out) {
    for (std::uint32_t i = 0; i < n; ++i) {
      out[i] = loupe_frame{};
      out[i].address = a[i];
      out[i].kind = kind;
      out[i].resolution = LOUPE_UNRESOLVED_NOT_ATTEMPTED;
    }
    return LOUPE_OK;
  }
  static std::uint64_t now_ns(loupe_host*, std::uint32_t clock) {
    return clock_ns(clock == LOUPE_CLOCK_REALTIME   ? CLOCK_REALTIME
                    : clock == LOUPE_CLOCK_BOOTTIME ? CLOCK_BOOTTIME
                                                    : CLOCK_MONOTONIC);
  }
  static std::uint64_t boot_to_wall_ns(loupe_host*, std::uint64_t boot) {
    return boot + clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_BOOTTIME);
  }
  static const char* last_error(loupe_host*) { return g_last_error.c_str(); }
  static int on_sample(void* ctx, void* data, size_t len) {
    auto* spec = static_cast<loupe_ring_spec*>(ctx);
    return spec->decode(spec->user, data, static_cast<std::uint32_t>(len)) == LOUPE_OK ? 0 : 0;
  }
};

FakeHost::FakeHost() {
  services_.size = sizeof(services_);
  services_.abi_major = LOUPE_ABI_MAJOR;
  services_.abi_minor = LOUPE_ABI_MINOR;
  services_.host = reinterpret_cast<loupe_host*>(this);
  services_.log = &FakeHostShims::log;
  services_.config_bool = &FakeHostShims::config_bool;
  services_.config_int = &FakeHostShims::config_int;
  services_.config_float = &FakeHostShims::config_float;
  services_.config_string = &FakeHostShims::config_string;
  services_.config_list_len = &FakeHostShims::config_list_len;
  services_.config_list_string = &FakeHostShims::config_list_string;
  services_.config_list_int = &FakeHostShims::config_list_int;
  services_.config_list_table = &FakeHostShims::config_list_table;
  services_.feature_available = &FakeHostShims::feature_available;
  services_.tracepoint_exists = &FakeHostShims::tracepoint_exists;
  services_.ksym_exists = &FakeHostShims::ksym_exists;
  services_.bpf_load = &FakeHostShims::bpf_load;
  services_.bpf_attach = &FakeHostShims::bpf_attach;
  services_.bpf_adopt_link = &FakeHostShims::bpf_adopt_link;
  services_.ring_register = &FakeHostShims::ring_register;
  services_.emit = &FakeHostShims::emit;
  services_.symbolize = &FakeHostShims::symbolize;
  services_.now_ns = &FakeHostShims::now_ns;
  services_.boot_to_wall_ns = &FakeHostShims::boot_to_wall_ns;
  services_.last_error = &FakeHostShims::last_error;
}

FakeHost::~FakeHost() {
  detach_all();
  if (rb_) ring_buffer__free(rb_);
}

void FakeHost::detach_all() {
  for (auto* l : links_) bpf_link__destroy(l);
  links_.clear();
}

int FakeHost::drain_rings() {
  if (!rb_) {
    for (auto& spec : rings_) {
      if (!rb_)
        rb_ = ring_buffer__new(spec.map_fd, &FakeHostShims::on_sample, &spec, nullptr);
      else
        ring_buffer__add(rb_, spec.map_fd, &FakeHostShims::on_sample, &spec);
    }
  }
  return rb_ ? ring_buffer__consume(rb_) : 0;
}

const CapturedRecord* FakeHost::find(std::uint32_t kind, const std::string& name,
                                     const std::map<std::string, std::string>& labels) const {
  const CapturedRecord* found = nullptr;
  for (const auto& r : records) {
    if (r.kind != kind || r.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : labels) {
      auto it = r.labels.find(k);
      if (it == r.labels.end() || it->second != v) ok = false;
    }
    if (ok) found = &r;  // the latest one wins
  }
  return found;
}

}  // namespace loupe::test
