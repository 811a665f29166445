/* DAG scaling: many command groups over many buffers with random ranged
 * accesses. Each group adds 1 to the first element of a random range of
 * one buffer (read_write) and, every other group, also reads a random
 * range of another buffer; Syrah orders conflicting groups from their
 * accessors on an out-of-order queue. The raw OpenCL baseline enqueues the
 * same kernels, with the offset as an argument, on an in-order queue (it
 * needs no dependency tracking, being serial).
 *
 * Syrah and raw take turns, a window of submissions each, in one process:
 * both meet the same state of the process, the driver and the machine, so
 * a drift of either over the run is set against the other's. Per window:
 * host microseconds per submission, the growth of resident memory during
 * each side's windows, summed since the run began (the process is one, so
 * memory another thread frees or takes meanwhile counts to the side whose
 * window it falls in), and the commands still in flight (submitted, not
 * finished: counted in whole windows from the last command of each
 * window), so the cost of the last window can be set against the first and
 * memory against work in flight. Every element of every buffer is checked
 * against a host model at the end. With libsyrah_clcalls.so loaded, the
 * OpenCL calls of each side's last window are printed.
 *
 * usage: bench_dag P.D [groups] [buffers] [window] */
#include "bench_common.h"

static const char *source =
    "__kernel void add1(__global int *a) { a[0] += 1; }\n"
    "__kernel void add1_read(__global int *a, __global const int *b) { a[0] += 1 + 0 * b[0]; }\n"
    "__kernel void raw_add1(__global int *a, int o) { a[o] += 1; }\n"
    "__kernel void raw_add1_read(__global int *a, int o, __global const int *b, int p) { a[o] += 1 + 0 * b[p]; }\n";

enum { ELEMS = 4096, MAX_RANGE = 512, MAX_WINDOWS = 4096 };

static long groups = 1000000, window = 10000;
static int buffers = 1000;

typedef struct {
  double us[MAX_WINDOWS];
  double rss_mib[MAX_WINDOWS]; /* growth during this side's windows, summed */
  long inflight[MAX_WINDOWS];
  double setup_mib; /* resident memory added by creating and filling the buffers */
  int done_windows; /* windows whose last command has finished */
  int windows;
  double total_s;
  long wrong;
  unsigned long long rng; /* each side draws the same groups */
} result;

static unsigned rnd(unsigned long long *state, unsigned n) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)((*state >> 33) % n);
}

typedef struct {
  int buf, off, len, other, other_off, other_len;
} group;

static group next_group(unsigned long long *state, long i) {
  group g;
  g.buf = (int)rnd(state, (unsigned)buffers);
  g.len = 1 + (int)rnd(state, MAX_RANGE);
  g.off = (int)rnd(state, (unsigned)(ELEMS - g.len + 1));
  g.other = -1;
  g.other_off = g.other_len = 0;
  if (i % 2 && buffers > 1) {
    g.other = (g.buf + 1 + (int)rnd(state, (unsigned)buffers - 1)) % buffers;
    g.other_len = 1 + (int)rnd(state, MAX_RANGE);
    g.other_off = (int)rnd(state, (unsigned)(ELEMS - g.other_len + 1));
  }
  return g;
}

/* The expected contents: +1 at each group's first element. */
static int *model(void) {
  int *m = (int *)calloc((size_t)buffers * ELEMS, sizeof(int));
  unsigned long long state = 42;
  long i;
  if (!m) exit(1);
  for (i = 0; i < groups; ++i) {
    group g = next_group(&state, i);
    m[(size_t)g.buf * ELEMS + (size_t)g.off] += 1;
  }
  return m;
}

/* Records window `r->windows`, which began at `t0` with resident memory
 * `rss0`; `finished(k)` says whether window k's last command has finished. */
static void window_done(result *r, double t0, double rss0, int (*finished)(int), const char *label) {
  double t = now_us();
  double grown = rss_mib() - rss0;
  if (label) calls_end(label, (int)window, (t - t0) / (double)window);
  if (r->windows >= MAX_WINDOWS) return;
  r->us[r->windows] = (t - t0) / (double)window;
  r->rss_mib[r->windows] = (r->windows ? r->rss_mib[r->windows - 1] : 0) + grown;
  r->total_s += (t - t0) / 1e6;
  while (r->done_windows <= r->windows && finished(r->done_windows)) ++r->done_windows;
  r->inflight[r->windows] = (long)(r->windows + 1 - r->done_windows) * window;
  ++r->windows;
}

typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k1, *k2;
  syrah_buffer **b;
  syrah_event *last[MAX_WINDOWS];
} sy_side;

static sy_side sy;

static int sy_finished(int k) {
  syrah_event_status st = SYRAH_EVENT_QUEUED;
  SY_OK(syrah_event_get_status(sy.last[k], &st));
  return st == SYRAH_EVENT_COMPLETE;
}

static void sy_open(const char *spec, result *r) {
  const syrah_device *dev;
  syrah_buffer_desc bd;
  double before;
  int j;
  sy.b = (syrah_buffer **)calloc((size_t)buffers, sizeof *sy.b);
  if (!sy.b) exit(1);
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, 0, NULL, NULL, &sy.q));
  SY_OK(syrah_queue_get_context(sy.q, &sy.ctx));
  SY_OK(syrah_program_create_from_source(sy.ctx, source, NULL, &sy.prog));
  SY_OK(syrah_kernel_create(sy.prog, "add1", &sy.k1));
  SY_OK(syrah_kernel_create(sy.prog, "add1_read", &sy.k2));
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 1;
  bd.range[0] = ELEMS;
  before = rss_mib();
  for (j = 0; j < buffers; ++j) {
    syrah_accessor a;
    int zero = 0;
    SY_OK(syrah_buffer_create(&bd, &sy.b[j]));
    memset(&a, 0, sizeof a);
    a.buffer = sy.b[j];
    a.mode = SYRAH_ACCESS_DISCARD_WRITE;
    SY_OK(syrah_queue_fill_accessor(sy.q, &a, &zero, sizeof zero, NULL, 0, NULL));
  }
  SY_OK(syrah_queue_wait(sy.q));
  r->setup_mib = rss_mib() - before;
  r->rng = 42;
}

/* Submits groups [from, from + window) and records the window. */
static void sy_window(result *r, long from) {
  syrah_range one = syrah_range_1d(1);
  syrah_kernel_arg args[2] = {{SYRAH_ARG_ACCESSOR, 0, NULL}, {SYRAH_ARG_ACCESSOR, 1, NULL}};
  const char *label = from + window >= groups ? "Syrah, last window" : NULL;
  double rss0, t0;
  long i;
  if (label) calls_begin();
  rss0 = rss_mib();
  t0 = now_us();
  for (i = from; i < from + window; ++i) {
    group g = next_group(&r->rng, i);
    syrah_event **ev = i + 1 == from + window ? &sy.last[r->windows] : NULL;
    syrah_accessor acc[2];
    memset(acc, 0, sizeof acc);
    acc[0].buffer = sy.b[g.buf];
    acc[0].mode = SYRAH_ACCESS_READ_WRITE;
    acc[0].offset[0] = (size_t)g.off;
    acc[0].range[0] = (size_t)g.len;
    if (g.other >= 0) {
      acc[1].buffer = sy.b[g.other];
      acc[1].mode = SYRAH_ACCESS_READ;
      acc[1].offset[0] = (size_t)g.other_off;
      acc[1].range[0] = (size_t)g.other_len;
      SY_OK(syrah_queue_submit_kernel(sy.q, sy.k2, &one, acc, 2, args, 2, NULL, 0, ev));
    } else {
      SY_OK(syrah_queue_submit_kernel(sy.q, sy.k1, &one, acc, 1, args, 1, NULL, 0, ev));
    }
  }
  window_done(r, t0, rss0, sy_finished, label);
}

static void sy_close(const int *expect, result *r) {
  int j, e;
  double t0 = now_us();
  SY_OK(syrah_queue_wait(sy.q));
  r->total_s += (now_us() - t0) / 1e6;
  for (j = 0; j < r->windows; ++j) SY_OK(syrah_event_release(sy.last[j]));
  for (j = 0; j < buffers; ++j) {
    syrah_host_accessor *ha;
    int *p;
    SY_OK(syrah_buffer_host_access(sy.b[j], SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    for (e = 0; e < ELEMS; ++e) r->wrong += p[e] != expect[(size_t)j * ELEMS + (size_t)e];
    SY_OK(syrah_host_accessor_release(ha));
    SY_OK(syrah_buffer_release(sy.b[j]));
  }
  free(sy.b);
  SY_OK(syrah_kernel_release(sy.k1));
  SY_OK(syrah_kernel_release(sy.k2));
  SY_OK(syrah_program_release(sy.prog));
  SY_OK(syrah_context_release(sy.ctx));
  SY_OK(syrah_queue_release(sy.q));
}

typedef struct {
  raw_env e;
  cl_kernel k2;
  cl_mem *m;
  cl_event last[MAX_WINDOWS];
} raw_side;

static raw_side raw;

static int raw_finished(int k) {
  cl_int st = CL_QUEUED;
  CL_OK(clGetEventInfo(raw.last[k], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
  return st == CL_COMPLETE;
}

static void raw_open_side(unsigned p, unsigned d, result *r) {
  cl_int err;
  double before;
  int j;
  raw.m = (cl_mem *)calloc((size_t)buffers, sizeof *raw.m);
  if (!raw.m) exit(1);
  raw_open(p, d, 0, source, "raw_add1", &raw.e);
  raw.k2 = clCreateKernel(raw.e.prog, "raw_add1_read", &err);
  CL_OK(err);
  before = rss_mib();
  for (j = 0; j < buffers; ++j) {
    int zero = 0;
    raw.m[j] = clCreateBuffer(raw.e.ctx, CL_MEM_READ_WRITE, sizeof(int) * ELEMS, NULL, &err);
    CL_OK(err);
    CL_OK(clEnqueueFillBuffer(raw.e.q, raw.m[j], &zero, sizeof zero, 0, sizeof(int) * ELEMS, 0, NULL, NULL));
  }
  CL_OK(clFinish(raw.e.q));
  r->setup_mib = rss_mib() - before;
  r->rng = 42;
}

static void raw_window(result *r, long from) {
  size_t one = 1;
  const char *label = from + window >= groups ? "raw, last window" : NULL;
  double rss0, t0;
  long i;
  int flush = raw_flushes(raw.e.dev);
  if (label) calls_begin();
  rss0 = rss_mib();
  t0 = now_us();
  for (i = from; i < from + window; ++i) {
    group g = next_group(&r->rng, i);
    cl_event *ev = i + 1 == from + window ? &raw.last[r->windows] : NULL;
    if (g.other >= 0) {
      CL_OK(clSetKernelArg(raw.k2, 0, sizeof(cl_mem), &raw.m[g.buf]));
      CL_OK(clSetKernelArg(raw.k2, 1, sizeof(int), &g.off));
      CL_OK(clSetKernelArg(raw.k2, 2, sizeof(cl_mem), &raw.m[g.other]));
      CL_OK(clSetKernelArg(raw.k2, 3, sizeof(int), &g.other_off));
      CL_OK(clEnqueueNDRangeKernel(raw.e.q, raw.k2, 1, NULL, &one, NULL, 0, NULL, ev));
    } else {
      CL_OK(clSetKernelArg(raw.e.k, 0, sizeof(cl_mem), &raw.m[g.buf]));
      CL_OK(clSetKernelArg(raw.e.k, 1, sizeof(int), &g.off));
      CL_OK(clEnqueueNDRangeKernel(raw.e.q, raw.e.k, 1, NULL, &one, NULL, 0, NULL, ev));
    }
    if (flush) CL_OK(clFlush(raw.e.q));
  }
  window_done(r, t0, rss0, raw_finished, label);
}

static void raw_close_side(const int *expect, result *r) {
  int *host = (int *)malloc(sizeof(int) * ELEMS);
  int j, x;
  double t0 = now_us();
  if (!host) exit(1);
  CL_OK(clFinish(raw.e.q));
  r->total_s += (now_us() - t0) / 1e6;
  for (j = 0; j < r->windows; ++j) CL_OK(clReleaseEvent(raw.last[j]));
  for (j = 0; j < buffers; ++j) {
    CL_OK(clEnqueueReadBuffer(raw.e.q, raw.m[j], CL_TRUE, 0, sizeof(int) * ELEMS, host, 0, NULL, NULL));
    for (x = 0; x < ELEMS; ++x) r->wrong += host[x] != expect[(size_t)j * ELEMS + (size_t)x];
    CL_OK(clReleaseMemObject(raw.m[j]));
  }
  free(raw.m);
  free(host);
  CL_OK(clReleaseKernel(raw.k2));
  raw_close(&raw.e);
}

static result rs, rr;

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  char name[256];
  const syrah_device *dev;
  int *expect, w;
  long from;
  if (argc > 2) groups = atol(argv[2]);
  if (argc > 3) buffers = atoi(argv[3]);
  if (argc > 4) window = atol(argv[4]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || groups < 1 || buffers < 1 || window < 1 ||
      groups / window > MAX_WINDOWS || groups < window) {
    fprintf(stderr, "usage: bench_dag P.D [groups] [buffers] [window], at most %d windows\n", MAX_WINDOWS);
    return 2;
  }
  groups -= groups % window; /* whole windows only */
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  expect = model();
  sy_open(argv[1], &rs);
  raw_open_side(p, d, &rr);
  /* The side that goes first changes every window. */
  for (from = 0, w = 0; from < groups; from += window, ++w) {
    if (w % 2) {
      raw_window(&rr, from);
      sy_window(&rs, from);
    } else {
      sy_window(&rs, from);
      raw_window(&rr, from);
    }
  }
  sy_close(expect, &rs);
  raw_close_side(expect, &rr);
  free(expect);
  printf("## DAG scaling: %ld command groups over %d buffers, device %s (%s)\n\n", groups, buffers, argv[1], name);
  printf("Syrah and raw OpenCL take turns, %ld submissions each.\n\n", window);
  printf("| submissions | Syrah µs per submission | raw µs per submission | Syrah resident MiB added | raw resident "
         "MiB added | Syrah commands in flight | raw commands in flight |\n|---|---|---|---|---|---|---|\n");
  for (w = 0; w < rs.windows; ++w) {
    long n = (long)(w + 1) * window;
    if (w < 3 || w >= rs.windows - 3 || rs.windows <= 12 || w % (rs.windows / 8) == 0)
      printf("| %ld | %.2f | %.2f | %.1f | %.1f | %ld | %ld |\n", n, rs.us[w], rr.us[w], rs.rss_mib[w],
             rr.rss_mib[w], rs.inflight[w], rr.inflight[w]);
    bench_json("{\"bench\":\"dag\",\"device\":\"%s\",\"device_name\":\"%s\",\"submissions\":%ld,"
               "\"syrah_us\":%.4f,\"raw_us\":%.4f,\"syrah_rss_mib\":%.2f,\"raw_rss_mib\":%.2f,"
               "\"syrah_inflight\":%ld,\"raw_inflight\":%ld}",
               argv[1], name, n, rs.us[w], rr.us[w], rs.rss_mib[w], rr.rss_mib[w], rs.inflight[w], rr.inflight[w]);
  }
  {
    /* Single windows move with the machine's noise: also the medians of
     * the first and the last tenth of the windows. */
    int tenth = rs.windows >= 10 ? rs.windows / 10 : 1;
    double sf = median(rs.us, tenth), sl = median(rs.us + rs.windows - tenth, tenth);
    double rf = median(rr.us, tenth), rl = median(rr.us + rr.windows - tenth, tenth);
    printf("\nLast window against the first: Syrah %.3f, raw %.3f; median of the last %d windows against the "
           "first %d: Syrah %.3f, raw %.3f. Total: Syrah %.2f s, raw %.2f s. Results: %s\n",
           rs.us[rs.windows - 1] / rs.us[0], rr.us[rr.windows - 1] / rr.us[0], tenth, tenth, sl / sf, rl / rf,
           rs.total_s, rr.total_s, rs.wrong || rr.wrong ? "WRONG" : "ok");
    printf("Creating and filling the %d buffers added %.1f MiB of resident memory with Syrah, %.1f MiB raw.\n",
           buffers, rs.setup_mib, rr.setup_mib);
    bench_json("{\"bench\":\"dag_summary\",\"device\":\"%s\",\"device_name\":\"%s\",\"groups\":%ld,"
               "\"buffers\":%d,\"syrah_last_over_first\":%.4f,\"syrah_last_tenth_over_first_tenth\":%.4f,"
               "\"raw_last_over_first\":%.4f,\"raw_last_tenth_over_first_tenth\":%.4f,\"syrah_total_s\":%.3f,"
               "\"raw_total_s\":%.3f,\"syrah_setup_mib\":%.2f,\"raw_setup_mib\":%.2f,\"interleaved\":true,"
               "\"ok\":%s}",
               argv[1], name, groups, buffers, rs.us[rs.windows - 1] / rs.us[0], sl / sf,
               rr.us[rr.windows - 1] / rr.us[0], rl / rf, rs.total_s, rr.total_s, rs.setup_mib, rr.setup_mib,
               rs.wrong || rr.wrong ? "false" : "true");
  }
  if (rs.wrong || rr.wrong) fprintf(stderr, "wrong elements: Syrah %ld, raw %ld\n", rs.wrong, rr.wrong);
  return rs.wrong || rr.wrong;
}
