/* Deliberately broken plugin tables, one library each (selected by -D at build time). */
#include <stddef.h>
#include "loupe/abi/plugin.h"

static int setup(const loupe_setup_args* a, loupe_plugin** out) {
  (void)a;
  *out = (loupe_plugin*)1;
  return 0;
}
static int start(loupe_plugin* p, const loupe_start_args* a) {
  (void)p;
  (void)a;
  return 0;
}
static void destroy(loupe_plugin* p) {
  (void)p;
}
static const char* last_error(loupe_plugin* p) {
  (void)p;
  return "";
}

static loupe_plugin_descriptor d = {
    .size = sizeof(loupe_plugin_descriptor),
    .abi_major = LOUPE_ABI_MAJOR,
    .abi_minor = LOUPE_ABI_MINOR,
    .kind = LOUPE_KIND_PROFILER,
    .name = BAD_NAME,
    .version = "0.0.1",
    .setup = setup,
    .start = start,
    .destroy = destroy,
    .last_error = last_error,
};

#ifndef NO_ENTRY
LOUPE_ABI_EXPORT const loupe_plugin_descriptor* loupe_plugin_entry(void) {
#if defined(WRONG_MAJOR)
  d.abi_major = LOUPE_ABI_MAJOR + 1;
#elif defined(NEWER_MINOR)
  d.abi_minor = LOUPE_ABI_MINOR + 1;
#elif defined(TRUNCATED)
  d.size = 24;
#elif defined(MISSING_HOOK)
  d.start = NULL;
#endif
  return &d;
}
#else
LOUPE_ABI_EXPORT int not_loupe(void) {
  return 42;
}
#endif
