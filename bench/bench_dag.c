/* DAG scaling: many command groups over many buffers with random ranged
 * accesses. Each group adds 1 to the first element of a random range of
 * one buffer (read_write) and, every other group, also reads a random
 * range of another buffer; Syrah orders conflicting groups from their
 * accessors on an out-of-order queue. The raw OpenCL baseline enqueues the
 * same kernels, with the offset as an argument, on an in-order queue (it
 * needs no dependency tracking, being serial).
 *
 * Per window of submissions: host microseconds per submission, the growth
 * of the process's resident memory since the run began, and the commands
 * still in flight (submitted, not finished: counted in whole windows from
 * the last command of each window), so the cost of the last window can be
 * set against the first and memory against work in flight. Every element
 * of every buffer is checked against a host model at the end.
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
  double rss_mib[MAX_WINDOWS]; /* growth since the run began */
  long inflight[MAX_WINDOWS];
  double rss0;
  double setup_mib; /* resident memory added by creating and filling the buffers */
  int done_windows; /* windows whose last command has finished */
  int windows;
  double total_s;
  long wrong;
} result;

static unsigned long long rng_state;
static unsigned rnd(unsigned n) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)((rng_state >> 33) % n);
}

typedef struct {
  int buf, off, len, other, other_off, other_len;
} group;

static group next_group(long i) {
  group g;
  g.buf = (int)rnd((unsigned)buffers);
  g.len = 1 + (int)rnd(MAX_RANGE);
  g.off = (int)rnd((unsigned)(ELEMS - g.len + 1));
  g.other = -1;
  g.other_off = g.other_len = 0;
  if (i % 2 && buffers > 1) {
    g.other = (g.buf + 1 + (int)rnd((unsigned)buffers - 1)) % buffers;
    g.other_len = 1 + (int)rnd(MAX_RANGE);
    g.other_off = (int)rnd((unsigned)(ELEMS - g.other_len + 1));
  }
  return g;
}

/* The expected contents: +1 at each group's first element. */
static int *model(void) {
  int *m = (int *)calloc((size_t)buffers * ELEMS, sizeof(int));
  long i;
  if (!m) exit(1);
  rng_state = 42;
  for (i = 0; i < groups; ++i) {
    group g = next_group(i);
    m[(size_t)g.buf * ELEMS + (size_t)g.off] += 1;
  }
  return m;
}

/* Ends window `r->windows` when submission `i` is its last; `finished(k)`
 * says whether window k's last command has finished. */
static int window_end(long i) { return (i + 1) % window == 0; }

static void window_done(result *r, double *t0, int (*finished)(int)) {
  double t = now_us();
  if (r->windows >= MAX_WINDOWS) return;
  r->us[r->windows] = (t - *t0) / (double)window;
  r->rss_mib[r->windows] = rss_mib() - r->rss0;
  while (r->done_windows <= r->windows && finished(r->done_windows)) ++r->done_windows;
  r->inflight[r->windows] = (long)(r->windows + 1 - r->done_windows) * window;
  ++r->windows;
  *t0 = now_us();
}

static syrah_event *sy_last[MAX_WINDOWS];
static int sy_finished(int k) {
  syrah_event_status st = SYRAH_EVENT_QUEUED;
  SY_OK(syrah_event_get_status(sy_last[k], &st));
  return st == SYRAH_EVENT_COMPLETE;
}

static cl_event raw_last[MAX_WINDOWS];
static int raw_finished(int k) {
  cl_int st = CL_QUEUED;
  CL_OK(clGetEventInfo(raw_last[k], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
  return st == CL_COMPLETE;
}

static void run_syrah(const char *spec, const int *expect, result *r) {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k1, *k2;
  syrah_buffer **b = (syrah_buffer **)calloc((size_t)buffers, sizeof *b);
  syrah_buffer_desc bd;
  syrah_range one = syrah_range_1d(1);
  syrah_kernel_arg args[2] = {{SYRAH_ARG_ACCESSOR, 0, NULL}, {SYRAH_ARG_ACCESSOR, 1, NULL}};
  double t0, start;
  long i;
  int j, e;
  if (!b) exit(1);
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, 0, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "add1", &k1));
  SY_OK(syrah_kernel_create(prog, "add1_read", &k2));
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 1;
  bd.range[0] = ELEMS;
  r->setup_mib = rss_mib();
  for (j = 0; j < buffers; ++j) {
    syrah_accessor a;
    int zero = 0;
    SY_OK(syrah_buffer_create(&bd, &b[j]));
    memset(&a, 0, sizeof a);
    a.buffer = b[j];
    a.mode = SYRAH_ACCESS_DISCARD_WRITE;
    SY_OK(syrah_queue_fill_accessor(q, &a, &zero, sizeof zero, NULL, 0, NULL));
  }
  SY_OK(syrah_queue_wait(q));
  rng_state = 42;
  r->rss0 = rss_mib();
  r->setup_mib = r->rss0 - r->setup_mib;
  start = t0 = now_us();
  for (i = 0; i < groups; ++i) {
    group g = next_group(i);
    syrah_event **ev = window_end(i) && r->windows < MAX_WINDOWS ? &sy_last[r->windows] : NULL;
    syrah_accessor acc[2];
    memset(acc, 0, sizeof acc);
    acc[0].buffer = b[g.buf];
    acc[0].mode = SYRAH_ACCESS_READ_WRITE;
    acc[0].offset[0] = (size_t)g.off;
    acc[0].range[0] = (size_t)g.len;
    if (g.other >= 0) {
      acc[1].buffer = b[g.other];
      acc[1].mode = SYRAH_ACCESS_READ;
      acc[1].offset[0] = (size_t)g.other_off;
      acc[1].range[0] = (size_t)g.other_len;
      SY_OK(syrah_queue_submit_kernel(q, k2, &one, acc, 2, args, 2, NULL, 0, ev));
    } else {
      SY_OK(syrah_queue_submit_kernel(q, k1, &one, acc, 1, args, 1, NULL, 0, ev));
    }
    if (ev) window_done(r, &t0, sy_finished);
  }
  SY_OK(syrah_queue_wait(q));
  r->total_s = (now_us() - start) / 1e6;
  for (j = 0; j < r->windows; ++j) SY_OK(syrah_event_release(sy_last[j]));
  for (j = 0; j < buffers; ++j) {
    syrah_host_accessor *ha;
    int *p;
    SY_OK(syrah_buffer_host_access(b[j], SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    for (e = 0; e < ELEMS; ++e) r->wrong += p[e] != expect[(size_t)j * ELEMS + (size_t)e];
    SY_OK(syrah_host_accessor_release(ha));
    SY_OK(syrah_buffer_release(b[j]));
  }
  free(b);
  SY_OK(syrah_kernel_release(k1));
  SY_OK(syrah_kernel_release(k2));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
}

static void run_raw(unsigned p, unsigned d, const int *expect, result *r) {
  raw_env e;
  cl_kernel k2;
  cl_int err;
  cl_mem *m = (cl_mem *)calloc((size_t)buffers, sizeof *m);
  int *host = (int *)malloc(sizeof(int) * ELEMS);
  size_t one = 1;
  double t0, start;
  long i;
  int j, x;
  if (!m || !host) exit(1);
  raw_open(p, d, 0, source, "raw_add1", &e);
  k2 = clCreateKernel(e.prog, "raw_add1_read", &err);
  CL_OK(err);
  r->setup_mib = rss_mib();
  for (j = 0; j < buffers; ++j) {
    int zero = 0;
    m[j] = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, sizeof(int) * ELEMS, NULL, &err);
    CL_OK(err);
    CL_OK(clEnqueueFillBuffer(e.q, m[j], &zero, sizeof zero, 0, sizeof(int) * ELEMS, 0, NULL, NULL));
  }
  CL_OK(clFinish(e.q));
  rng_state = 42;
  r->rss0 = rss_mib();
  r->setup_mib = r->rss0 - r->setup_mib;
  start = t0 = now_us();
  for (i = 0; i < groups; ++i) {
    group g = next_group(i);
    cl_event *ev = window_end(i) && r->windows < MAX_WINDOWS ? &raw_last[r->windows] : NULL;
    if (g.other >= 0) {
      CL_OK(clSetKernelArg(k2, 0, sizeof(cl_mem), &m[g.buf]));
      CL_OK(clSetKernelArg(k2, 1, sizeof(int), &g.off));
      CL_OK(clSetKernelArg(k2, 2, sizeof(cl_mem), &m[g.other]));
      CL_OK(clSetKernelArg(k2, 3, sizeof(int), &g.other_off));
      CL_OK(clEnqueueNDRangeKernel(e.q, k2, 1, NULL, &one, NULL, 0, NULL, ev));
    } else {
      CL_OK(clSetKernelArg(e.k, 0, sizeof(cl_mem), &m[g.buf]));
      CL_OK(clSetKernelArg(e.k, 1, sizeof(int), &g.off));
      CL_OK(clEnqueueNDRangeKernel(e.q, e.k, 1, NULL, &one, NULL, 0, NULL, ev));
    }
    CL_OK(clFlush(e.q));
    if (ev) window_done(r, &t0, raw_finished);
  }
  CL_OK(clFinish(e.q));
  r->total_s = (now_us() - start) / 1e6;
  for (j = 0; j < r->windows; ++j) CL_OK(clReleaseEvent(raw_last[j]));
  for (j = 0; j < buffers; ++j) {
    CL_OK(clEnqueueReadBuffer(e.q, m[j], CL_TRUE, 0, sizeof(int) * ELEMS, host, 0, NULL, NULL));
    for (x = 0; x < ELEMS; ++x) r->wrong += host[x] != expect[(size_t)j * ELEMS + (size_t)x];
    CL_OK(clReleaseMemObject(m[j]));
  }
  free(m);
  free(host);
  CL_OK(clReleaseKernel(k2));
  raw_close(&e);
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  char name[256];
  const syrah_device *dev;
  result sy, raw;
  int *expect, w;
  if (argc > 2) groups = atol(argv[2]);
  if (argc > 3) buffers = atoi(argv[3]);
  if (argc > 4) window = atol(argv[4]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || groups < 1 || buffers < 1 || window < 1 ||
      groups / window > MAX_WINDOWS || groups < window) {
    fprintf(stderr, "usage: bench_dag P.D [groups] [buffers] [window], at most %d windows\n", MAX_WINDOWS);
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  memset(&sy, 0, sizeof sy);
  memset(&raw, 0, sizeof raw);
  expect = model();
  run_syrah(argv[1], expect, &sy);
  run_raw(p, d, expect, &raw);
  free(expect);
  printf("## DAG scaling: %ld command groups over %d buffers, device %s (%s)\n\n", groups, buffers, argv[1], name);
  printf("| submissions | Syrah µs per submission | raw µs per submission | Syrah resident MiB added | raw resident "
         "MiB added | Syrah commands in flight | raw commands in flight |\n|---|---|---|---|---|---|---|\n");
  for (w = 0; w < sy.windows; ++w) {
    long n = (long)(w + 1) * window;
    if (w < 3 || w >= sy.windows - 3 || sy.windows <= 12 || w % (sy.windows / 8) == 0)
      printf("| %ld | %.2f | %.2f | %.1f | %.1f | %ld | %ld |\n", n, sy.us[w], raw.us[w], sy.rss_mib[w],
             raw.rss_mib[w], sy.inflight[w], raw.inflight[w]);
    bench_json("{\"bench\":\"dag\",\"device\":\"%s\",\"device_name\":\"%s\",\"submissions\":%ld,"
               "\"syrah_us\":%.4f,\"raw_us\":%.4f,\"syrah_rss_mib\":%.2f,\"raw_rss_mib\":%.2f,"
               "\"syrah_inflight\":%ld,\"raw_inflight\":%ld}",
               argv[1], name, n, sy.us[w], raw.us[w], sy.rss_mib[w], raw.rss_mib[w], sy.inflight[w], raw.inflight[w]);
  }
  {
    /* Single windows move with the machine's noise: also the medians of
     * the first and the last tenth of the windows. */
    int tenth = sy.windows >= 10 ? sy.windows / 10 : 1;
    double sf = median(sy.us, tenth), sl = median(sy.us + sy.windows - tenth, tenth);
    double rf = median(raw.us, tenth), rl = median(raw.us + raw.windows - tenth, tenth);
    printf("\nLast window against the first: Syrah %.3f, raw %.3f; median of the last %d windows against the "
           "first %d: Syrah %.3f, raw %.3f. Total: Syrah %.2f s, raw %.2f s. Results: %s\n",
           sy.us[sy.windows - 1] / sy.us[0], raw.us[raw.windows - 1] / raw.us[0], tenth, tenth, sl / sf, rl / rf,
           sy.total_s, raw.total_s, sy.wrong || raw.wrong ? "WRONG" : "ok");
    printf("Creating and filling the %d buffers added %.1f MiB of resident memory with Syrah, %.1f MiB raw.\n",
           buffers, sy.setup_mib, raw.setup_mib);
    bench_json("{\"bench\":\"dag_summary\",\"device\":\"%s\",\"device_name\":\"%s\",\"groups\":%ld,"
               "\"buffers\":%d,\"syrah_last_over_first\":%.4f,\"syrah_last_tenth_over_first_tenth\":%.4f,"
               "\"raw_last_over_first\":%.4f,\"syrah_total_s\":%.3f,\"raw_total_s\":%.3f,"
               "\"syrah_setup_mib\":%.2f,\"raw_setup_mib\":%.2f,\"ok\":%s}",
               argv[1], name, groups, buffers, sy.us[sy.windows - 1] / sy.us[0], sl / sf,
               raw.us[raw.windows - 1] / raw.us[0], sy.total_s, raw.total_s, sy.setup_mib, raw.setup_mib,
               sy.wrong || raw.wrong ? "false" : "true");
  }
  if (sy.wrong || raw.wrong) fprintf(stderr, "wrong elements: Syrah %ld, raw %ld\n", sy.wrong, raw.wrong);
  return sy.wrong || raw.wrong;
}
