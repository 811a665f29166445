/* Helpers shared by the benchmarks: a clock, checks that stop the run with
 * the failing call and its message, and a median. */
#ifndef SYRAH_BENCH_COMMON_H
#define SYRAH_BENCH_COMMON_H

#include <syrah.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A raw OpenCL call must succeed. */
#define CL_OK(call)                                                      \
  do {                                                                   \
    cl_int e_ = (call);                                                  \
    if (e_ != CL_SUCCESS) {                                              \
      fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #call, e_); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

/* A Syrah call must succeed. */
#define SY_OK(call)                                                                          \
  do {                                                                                       \
    syrah_status s_ = (call);                                                                \
    if (s_ != SYRAH_SUCCESS) {                                                               \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, syrah_status_name(s_), \
              syrah_last_error_message());                                                   \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static inline int bench_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Resident memory of this process in MiB (Linux; 0 where unknown). */
static inline double rss_mib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  fclose(f);
  return (double)resident * 4096.0 / (1 << 20);
}

static inline double median(const double *v, int n) {
  double *c = (double *)malloc(sizeof(double) * (size_t)n), m;
  if (!c) return 0;
  memcpy(c, v, sizeof(double) * (size_t)n);
  qsort(c, (size_t)n, sizeof(double), bench_cmp);
  m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  free(c);
  return m;
}

/* The median of the ratios s[i] / r[i] of `n` paired times (n <= 64). */
static inline double median_ratio(const double *s, const double *r, int n) {
  double q[64];
  int i;
  if (n > 64) n = 64;
  for (i = 0; i < n; ++i) q[i] = s[i] / r[i];
  return median(q, n);
}

/* The smallest and largest of the ratios s[i] / r[i] of `n` paired times:
 * how far single rounds move. */
static inline void ratio_spread(const double *s, const double *r, int n, double *lo, double *hi) {
  int i;
  *lo = *hi = n > 0 ? s[0] / r[0] : 0;
  for (i = 1; i < n; ++i) {
    double q = s[i] / r[i];
    if (q < *lo) *lo = q;
    if (q > *hi) *hi = q;
  }
}

/* The optional `aa` argument of the application benchmarks: 1 when it is
 * given (raw against raw, and the two sides named so), 0 when absent, -1
 * for anything else. */
static inline int parse_aa(int argc, char **argv, int at, const char *side[2]) {
  if (argc <= at) return 0;
  if (strcmp(argv[at], "aa") != 0) return -1;
  side[0] = "raw (first)";
  side[1] = "raw (second)";
  return 1;
}

/* Writes the `n` paired times as "s/r" in round order, for a line under a
 * table: where single rounds moved, and on which side. */
static inline void format_rounds(char *buf, size_t cap, const double *s, const double *r, int n) {
  size_t used = 0;
  int i;
  if (cap) buf[0] = 0;
  for (i = 0; i < n && used < cap; ++i) {
    int w = snprintf(buf + used, cap - used, "%s%.2f/%.2f", i ? ", " : "", s[i], r[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* Appends one JSON object (one line, formatted like printf) to the file
 * named by SYRAH_BENCH_JSON, if set; the suite collects these lines. */
static inline void bench_json(const char *fmt, ...) {
  const char *path = getenv("SYRAH_BENCH_JSON");
  FILE *f;
  va_list ap;
  if (!path || !*path) return;
  f = fopen(path, "a");
  if (!f) {
    fprintf(stderr, "cannot append to SYRAH_BENCH_JSON=%s\n", path);
    exit(1);
  }
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

/* OpenCL calls counted by libsyrah_clcalls.so (bench/clcalls.c) when it
 * is loaded: preloaded with LD_PRELOAD for the raw calls and named by
 * SYRAH_OPENCL_LIBRARY for Syrah's. calls_begin starts a count; calls_end
 * prints to stderr (the tables on stdout stay whole), per command of
 * `commands`, each call made since, and how much of
 * the `host_us` each command took was spent inside OpenCL. Both do nothing
 * when the library is not loaded. */
#include "clcalls.h"

static inline clcalls_take_fn calls_fn(void) {
  void *self = dlopen(NULL, RTLD_LAZY);
  void *f = self ? dlsym(self, "clcalls_take") : NULL;
  return (clcalls_take_fn)(size_t)f;
}

static inline void calls_begin(void) {
  clcalls_take_fn take = calls_fn();
  if (take) take(NULL, 0);
}

static inline void calls_end(const char *label, int commands, double host_us) {
  clcalls_row rows[64];
  clcalls_take_fn take = calls_fn();
  double inside = 0;
  int i, n;
  if (!take) return;
  n = take(rows, 64);
  if (n > 64) n = 64;
  fprintf(stderr, "| %s | call | calls per command | µs per call |\n| --- | --- | --- | --- |\n", label);
  for (i = 0; i < n; ++i) {
    double per = (double)rows[i].calls / commands, us = (double)rows[i].nanoseconds / 1e3 / (double)rows[i].calls;
    inside += per * us;
    fprintf(stderr, "| | %s | %.4f | %.3f |\n", rows[i].name, per, us);
  }
  fprintf(stderr, "| | host µs per command: %.3f, inside OpenCL %.3f, outside %.3f | | |\n\n", host_us, inside,
         host_us - inside);
}

/* Replaces characters that would need escaping in a JSON string. */
static inline void json_safe(char *s) {
  for (; *s; ++s)
    if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) *s = '_';
}

#ifdef CL_TARGET_OPENCL_VERSION
#include <CL/cl.h>

/* A raw OpenCL device P.D with one queue (`props`: its properties, 0 for
 * an in-order queue) and `kernel` built from `source`. */
typedef struct {
  cl_context ctx;
  cl_device_id dev;
  cl_command_queue q;
  cl_program prog;
  cl_kernel k;
} raw_env;

static inline void raw_open(unsigned p, unsigned d, cl_command_queue_properties props, const char *source,
                            const char *kernel, raw_env *e) {
  cl_platform_id plats[16];
  cl_device_id devs[16];
  cl_uint np = 0, nd = 0;
  cl_int err;
  cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, props, 0};
  /* Where Syrah's device is not an OpenCL one (the CUDA back end's), the
   * raw side runs on the OpenCL device SYRAH_BENCH_RAW_DEVICE names. */
  const char *raw = getenv("SYRAH_BENCH_RAW_DEVICE");
  if (raw && sscanf(raw, "%u.%u", &p, &d) != 2) {
    fprintf(stderr, "SYRAH_BENCH_RAW_DEVICE='%s' is not P.D\n", raw);
    exit(2);
  }
  CL_OK(clGetPlatformIDs(16, plats, &np));
  if (p >= np) {
    fprintf(stderr, "no OpenCL platform %u (%u found)\n", p, np);
    exit(2);
  }
  CL_OK(clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd));
  if (d >= nd) {
    fprintf(stderr, "no device %u on OpenCL platform %u (%u found)\n", d, p, nd);
    exit(2);
  }
  e->dev = devs[d];
  e->ctx = clCreateContext(NULL, 1, &e->dev, NULL, NULL, &err);
  CL_OK(err);
  e->q = clCreateCommandQueueWithProperties(e->ctx, e->dev, qp, &err);
  CL_OK(err);
  e->prog = clCreateProgramWithSource(e->ctx, 1, &source, NULL, &err);
  CL_OK(err);
  CL_OK(clBuildProgram(e->prog, 1, &e->dev, "", NULL, NULL));
  e->k = clCreateKernel(e->prog, kernel, &err);
  CL_OK(err);
}

/* Whether the raw side flushes its commands so that they start: on every
 * device but NVIDIA's OpenCL, which starts each command as it is enqueued,
 * so that a careful programmer leaves the flush (about 1 µs there) out, as
 * Syrah does. */
static inline int raw_flushes(cl_device_id dev) {
  char vendor[256] = "";
  CL_OK(clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor - 1, vendor, NULL));
  return strstr(vendor, "NVIDIA") == NULL;
}

static inline void raw_close(raw_env *e) {
  CL_OK(clReleaseKernel(e->k));
  CL_OK(clReleaseProgram(e->prog));
  CL_OK(clReleaseCommandQueue(e->q));
  CL_OK(clReleaseContext(e->ctx));
}
#endif

#endif
