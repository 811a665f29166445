/* Helpers shared by the benchmarks: a clock, checks that stop the run with
 * the failing call and its message, and a median. */
#ifndef SYRAH_BENCH_COMMON_H
#define SYRAH_BENCH_COMMON_H

#include <syrah.h>

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

static inline double median(const double *v, int n) {
  double *c = (double *)malloc(sizeof(double) * (size_t)n), m;
  if (!c) return 0;
  memcpy(c, v, sizeof(double) * (size_t)n);
  qsort(c, (size_t)n, sizeof(double), bench_cmp);
  m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  free(c);
  return m;
}

#endif
