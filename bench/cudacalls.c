/* A shared library that counts and times the CUDA driver calls Syrah's
 * CUDA back end makes on its hot paths: named by SYRAH_CUDA_LIBRARY, its
 * entry points come before libcuda.so.1's (Syrah takes the others from
 * there), and each forwards to libcuda.so.1 and adds the call and the
 * nanoseconds it took to its row. At exit the rows that were used are
 * printed to standard error: calls, and mean microseconds per call.
 *
 * No CUDA header is needed: handles are pointers, device addresses 64-bit
 * integers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int cu_result;
typedef unsigned long long cu_ptr;

enum { ROWS = 15 };
static const char *names[ROWS];
static unsigned long long counts[ROWS], nanos[ROWS];

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* The real entry point `name` of the CUDA driver library. */
static void *real(const char *name) {
  static void *driver;
  void *f;
  if (!driver) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  f = driver ? dlsym(driver, name) : NULL;
  if (!f) {
    fprintf(stderr, "cudacalls: the CUDA driver library has no %s\n", name);
    abort();
  }
  return f;
}

/* With CUDACALLS_NO_LAUNCH=1 in the environment, cuLaunchKernel launches
 * nothing and succeeds: a benchmark's host time per launch is then
 * Syrah's own path alone (and its results are wrong, as it says). */
static int no_launch(void) {
  static int v = -1;
  if (v < 0) v = getenv("CUDACALLS_NO_LAUNCH") && strcmp(getenv("CUDACALLS_NO_LAUNCH"), "1") == 0;
  return v;
}

/* Defines entry point `name`, row `row`: forwards and times the call,
 * or only counts it (succeeding) where `skip` holds. */
#define WRAP_UNLESS(skip, row, name, params, args)                        \
  cu_result name params {                                               \
    static cu_result(*next) params;                                     \
    unsigned long long t0;                                              \
    cu_result r;                                                        \
    if (!next) next = (__extension__(cu_result(*) params) real(#name)); \
    names[row] = #name;                                                 \
    t0 = now_ns();                                                      \
    r = (skip) ? 0 : next args;                                         \
    __atomic_fetch_add(&nanos[row], now_ns() - t0, __ATOMIC_RELAXED);   \
    __atomic_fetch_add(&counts[row], 1, __ATOMIC_RELAXED);              \
    return r;                                                           \
  }
#define WRAP(row, name, params, args) WRAP_UNLESS(0, row, name, params, args)

WRAP(0, cuEventCreate, (void **e, unsigned flags), (e, flags))
WRAP(1, cuEventRecord, (void *e, void *s), (e, s))
WRAP(2, cuEventQuery, (void *e), (e))
WRAP(3, cuEventDestroy_v2, (void *e), (e))
WRAP(4, cuEventSynchronize, (void *e), (e))
WRAP_UNLESS(no_launch(), 5, cuLaunchKernel,
     (void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
      void *s, void **params, void **extra),
     (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))
WRAP(6, cuGraphLaunch, (void *g, void *s), (g, s))
WRAP(7, cuStreamWaitEvent, (void *s, void *e, unsigned flags), (s, e, flags))
WRAP(8, cuLaunchHostFunc, (void *s, void *fn, void *user), (s, fn, user))
WRAP(9, cuStreamSynchronize, (void *s), (s))
WRAP(10, cuStreamQuery, (void *s), (s))
WRAP(11, cuMemcpyAsync, (cu_ptr d, cu_ptr src, size_t n, void *s), (d, src, n, s))
WRAP(12, cuMemcpy2DAsync_v2, (const void *c, void *s), (c, s))
WRAP(13, cuCtxSetCurrent, (void *c), (c))
WRAP(14, cuPointerGetAttribute, (void *data, int attribute, cu_ptr p), (data, attribute, p))

__attribute__((destructor)) static void report(void) {
  int i;
  fprintf(stderr, "cudacalls:");
  for (i = 0; i < ROWS; ++i)
    if (counts[i])
      fprintf(stderr, " %s %llu x %.3f us;", names[i], counts[i], (double)nanos[i] / 1000.0 / (double)counts[i]);
  fprintf(stderr, "\n");
}
