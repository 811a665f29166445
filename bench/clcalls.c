/* A shared library that counts and times the OpenCL calls of a process:
 * preloaded (LD_PRELOAD) it catches a program's own calls, and named by
 * SYRAH_OPENCL_LIBRARY it catches Syrah's. Each wrapper forwards to the
 * next definition (the OpenCL loader) and adds the call and the
 * nanoseconds it took to its row. Calls made through extension function
 * pointers are not seen.
 *
 * The program asks for the rows through clcalls_take (found with dlsym),
 * which hands them over and starts a new count. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clcalls.h"

static const char *const names[CLCALLS_N] = {
#define X(ret, name, params, args) #name,
    CLCALLS_LIST(X)
#undef X
};

static unsigned long long counts[CLCALLS_N], nanos[CLCALLS_N];

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void *next_of(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "clcalls: no definition of %s after this library\n", name);
    abort();
  }
  return f;
}

static void add(int i, unsigned long long t0) {
  __atomic_add_fetch(&counts[i], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&nanos[i], now_ns() - t0, __ATOMIC_RELAXED);
}

#define X(ret, name, params, args)                                        \
  CL_API_ENTRY ret CL_API_CALL name params {                              \
    typedef ret(CL_API_CALL * fn_t_) params;                             \
    static void *real_;                                                  \
    void *f_ = __atomic_load_n(&real_, __ATOMIC_RELAXED);                \
    unsigned long long t0_;                                              \
    ret r_;                                                              \
    if (!f_) {                                                           \
      f_ = next_of(#name);                                               \
      __atomic_store_n(&real_, f_, __ATOMIC_RELAXED);                    \
    }                                                                    \
    t0_ = now_ns();                                                      \
    r_ = ((fn_t_)(size_t)f_)args;                                        \
    add(CLCALLS_##name, t0_);                                            \
    return r_;                                                           \
  }
CLCALLS_LIST(X)
#undef X

int clcalls_take(clcalls_row *rows, int capacity) {
  int i, n = 0;
  for (i = 0; i < CLCALLS_N; ++i) {
    unsigned long long c = __atomic_exchange_n(&counts[i], 0, __ATOMIC_RELAXED);
    unsigned long long t = __atomic_exchange_n(&nanos[i], 0, __ATOMIC_RELAXED);
    if (c == 0) continue;
    if (n < capacity) {
      rows[n].name = names[i];
      rows[n].calls = c;
      rows[n].nanoseconds = t;
    }
    ++n;
  }
  return n;
}
