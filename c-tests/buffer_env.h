/* What the buffer tests share: their kernels, a queue with its program and
 * kernels on one device, one-accessor launches, and checks of a buffer's
 * contents, counters and events. Included once by each test program. */
#ifndef SYRAH_BUFFER_ENV_H
#define SYRAH_BUFFER_ENV_H
#include "testing.h"

static const char *kSource =
    "__kernel void twice(__global int *p) { p[get_global_id(0)] *= 2; }\n"
    "__kernel void setv(__global int *p, int v) { p[get_global_id(0)] = v; }\n"
    "__kernel void copyk(__global const int *a, __global int *b) {\n"
    "  b[get_global_id(0)] = a[get_global_id(0)] + 1; }\n"
    "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n"
    "__kernel void peek(__global const int *p, int pitch) { (void)p; (void)pitch; }\n"
    "__kernel void rows(__global int *p, int pitch) {\n"
    "  p[get_global_id(0) * pitch + get_global_id(1)] = (int)(get_global_id(0) * 1000 + get_global_id(1)); }\n";

enum { N = 1 << 16 }; /* 256 KiB of ints: one default page */

typedef struct {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *twice, *setv, *copyk, *rows, *peek, *inc;
} env;

static inline bool env_open_in(env *e, syrah_context *ctx, const syrah_device *d, syrah_queue_flags flags) {
  memset(e, 0, sizeof *e);
  e->dev = d;
  if (syrah_queue_create(ctx, d, flags, NULL, NULL, &e->q) != SYRAH_SUCCESS) return false;
  if (syrah_queue_get_context(e->q, &e->ctx) != SYRAH_SUCCESS) return false;
  if (syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) != SYRAH_SUCCESS) return false;
  return syrah_kernel_create(e->prog, "twice", &e->twice) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "setv", &e->setv) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "copyk", &e->copyk) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "rows", &e->rows) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "peek", &e->peek) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "inc", &e->inc) == SYRAH_SUCCESS;
}

static inline bool env_open(env *e, const syrah_device *d, syrah_queue_flags flags) {
  return env_open_in(e, NULL, d, flags);
}

static inline void env_close(env *e) {
  if (e->twice) syrah_kernel_release(e->twice);
  if (e->setv) syrah_kernel_release(e->setv);
  if (e->copyk) syrah_kernel_release(e->copyk);
  if (e->rows) syrah_kernel_release(e->rows);
  if (e->peek) syrah_kernel_release(e->peek);
  if (e->inc) syrah_kernel_release(e->inc);
  if (e->prog) syrah_program_release(e->prog);
  if (e->q) syrah_queue_release(e->q);
  if (e->ctx) syrah_context_release(e->ctx);
}

/* Runs `k` over `n` work-items with one accessor (and an int if `v`). */
static inline syrah_status run1(env *e, syrah_kernel *k, syrah_accessor a, size_t n, const int *v, syrah_event **ev) {
  syrah_range r = syrah_range_1d(n);
  syrah_kernel_arg args[2];
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  if (v) args[1] = syrah_arg_value(v, sizeof *v);
  return syrah_queue_submit_kernel(e->q, k, &r, &a, 1, args, v ? 2 : 1, NULL, 0, ev);
}

/* Arguments 0 and 1 bound to accessors 0 and 1. */
static inline void two_accessor_args(syrah_kernel_arg *args) {
  int i;
  for (i = 0; i < 2; ++i) {
    args[i].kind = SYRAH_ARG_ACCESSOR;
    args[i].size = (size_t)i;
    args[i].value = NULL;
  }
}

static inline syrah_buffer_stats stats(syrah_buffer *b) {
  syrah_buffer_stats s;
  memset(&s, 0, sizeof s);
  syrah_buffer_get_stats(b, &s);
  return s;
}

/* Whether the first `n` ints of `b`, read on the host, all equal `want`. */
static inline bool all_equal(syrah_buffer *b, size_t n, int want) {
  syrah_host_accessor *ha = NULL;
  int *p = NULL;
  bool ok = true;
  size_t i;
  if (syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p) != SYRAH_SUCCESS) {
    T_FAIL("host access: %s", syrah_last_error_message());
    return false;
  }
  for (i = 0; i < n; ++i) ok = ok && p[i] == want;
  if (syrah_host_accessor_release(ha) != SYRAH_SUCCESS) {
    T_FAIL("host accessor release: %s", syrah_last_error_message());
    return false;
  }
  return ok;
}

/* The status of `ev` once it completed, or after 5 s of asking every
 * 10 ms: a command held back by mistake fails the check instead of
 * hanging the test. */
static inline syrah_event_status status_within_5s(const syrah_event *ev) {
  syrah_event_status st = SYRAH_EVENT_QUEUED;
  int i;
  for (i = 0; i < 500 && ev && st != SYRAH_EVENT_COMPLETE; ++i) {
    EXPECT_OK(syrah_event_get_status(ev, &st));
    if (st != SYRAH_EVENT_COMPLETE) t_sleep_ms(10);
  }
  return st;
}

#endif
