/* Independent small kernels: do they overlap on the device?
 *
 * K one-work-group kernels over B buffers: kernel k updates buffer k % B,
 * so kernels of one buffer form a chain and the B chains are independent.
 * Syrah infers the chains from the accessors on an out-of-order queue;
 * the raw OpenCL baselines build them from events, once on one
 * out-of-order queue (where the device offers it) and once over four
 * in-order queues. From the profiling timestamps of every kernel:
 *   concurrency = sum of kernel times / (last end - first start)
 * (1.0: one at a time), the most kernels running at once, the host time
 * per submission and the wall time. Each buffer's result is checked.
 *
 * The paths take turns over the rounds, each round starting with the next
 * path, so that a drift of the driver or the machine over the run (and
 * the first run's warming of the driver) falls on all of them alike; the
 * table gives each path's medians, and the ratio of Syrah's wall time to
 * the better raw path's is the median of the rounds' ratios.
 *
 * usage: bench_independent P.D [kernels] [buffers] [spin] [rounds]
 *   spin: dependent integer steps per work-item (kernel length);
 *   rounds: default 5, at most 16. */
#include "bench_common.h"

static const char *source =
    "__kernel void spin(__global uint *p, int n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  uint x = p[i];\n"
    "  for (int j = 0; j < n; ++j) x = x * 1664525u + 1013904223u;\n"
    "  p[i] = x;\n"
    "}\n";

enum { ELEMS = 64, RAW_QUEUES = 4, MAX_ROUNDS = 16 };

typedef struct {
  double concurrency, submit_us, wall_ms, kernel_us;
  int max_running;
  int wrong;
} result;

static int kernels = 10000, buffers = 16, spin = 20000, rounds = 5;

static cl_uint expected(cl_uint x, long steps) {
  long j;
  for (j = 0; j < steps; ++j) x = x * 1664525u + 1013904223u;
  return x;
}

/* Checks element 0 and the last of each buffer against the host. */
static int check(cl_uint *const *data) {
  int b, wrong = 0;
  for (b = 0; b < buffers; ++b) {
    long chain = kernels / buffers + (b < kernels % buffers ? 1 : 0);
    if (data[b][0] != expected((cl_uint)(b * ELEMS), chain * spin)) ++wrong;
    if (data[b][ELEMS - 1] != expected((cl_uint)(b * ELEMS + ELEMS - 1), chain * spin)) ++wrong;
  }
  return wrong;
}

static int cmp_u64(const void *x, const void *y) {
  cl_ulong a = *(const cl_ulong *)x, b = *(const cl_ulong *)y;
  return a < b ? -1 : a > b;
}

/* Concurrency and the most kernels at once from start/end pairs (ns). */
static void overlap(const cl_ulong *start, const cl_ulong *end, int n, result *r) {
  cl_ulong lo = start[0], hi = end[0], busy = 0;
  cl_ulong *s = (cl_ulong *)malloc(sizeof(cl_ulong) * (size_t)n);
  cl_ulong *e = (cl_ulong *)malloc(sizeof(cl_ulong) * (size_t)n);
  int i, j = 0, running = 0;
  if (!s || !e) exit(1);
  for (i = 0; i < n; ++i) {
    if (start[i] < lo) lo = start[i];
    if (end[i] > hi) hi = end[i];
    busy += end[i] - start[i];
    s[i] = start[i];
    e[i] = end[i];
  }
  qsort(s, (size_t)n, sizeof *s, cmp_u64);
  qsort(e, (size_t)n, sizeof *e, cmp_u64);
  r->max_running = 0;
  for (i = 0; i < n; ++i) {
    while (j < n && e[j] <= s[i]) {
      --running;
      ++j;
    }
    if (++running > r->max_running) r->max_running = running;
  }
  r->concurrency = hi > lo ? (double)busy / (double)(hi - lo) : 0;
  r->kernel_us = (double)busy / n / 1e3;
  free(s);
  free(e);
}

static void run_raw(unsigned p, unsigned d, int ooo, result *r) {
  raw_env e;
  cl_int err;
  cl_context ctx;
  cl_command_queue q[RAW_QUEUES];
  cl_kernel k;
  cl_command_queue_properties props = CL_QUEUE_PROFILING_ENABLE | (ooo ? CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE : 0);
  cl_mem *mem = (cl_mem *)calloc((size_t)buffers, sizeof(cl_mem));
  cl_event *ev = (cl_event *)calloc((size_t)kernels, sizeof(cl_event));
  cl_event *last = (cl_event *)calloc((size_t)buffers, sizeof(cl_event));
  cl_ulong *st = (cl_ulong *)calloc((size_t)kernels, sizeof(cl_ulong));
  cl_ulong *en = (cl_ulong *)calloc((size_t)kernels, sizeof(cl_ulong));
  cl_uint **data = (cl_uint **)calloc((size_t)buffers, sizeof(cl_uint *));
  cl_uint init[ELEMS];
  size_t global = ELEMS;
  int i, b, nq = ooo ? 1 : RAW_QUEUES, flush;
  double t0, t1;
  if (!mem || !ev || !last || !st || !en || !data) exit(1);
  raw_open(p, d, props, source, "spin", &e);
  flush = raw_flushes(e.dev);
  ctx = e.ctx;
  k = e.k;
  q[0] = e.q;
  for (i = 1; i < nq; ++i) {
    cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, props, 0};
    q[i] = clCreateCommandQueueWithProperties(ctx, e.dev, qp, &err);
    CL_OK(err);
  }
  for (b = 0; b < buffers; ++b) {
    for (i = 0; i < ELEMS; ++i) init[i] = (cl_uint)(b * ELEMS + i);
    mem[b] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof init, init, &err);
    CL_OK(err);
    data[b] = (cl_uint *)malloc(sizeof init);
    if (!data[b]) exit(1);
  }
  for (i = 0; i < nq; ++i) CL_OK(clFinish(q[i]));
  calls_begin();
  t0 = now_us();
  for (i = 0; i < kernels; ++i) {
    b = i % buffers;
    CL_OK(clSetKernelArg(k, 0, sizeof(cl_mem), &mem[b]));
    CL_OK(clSetKernelArg(k, 1, sizeof(int), &spin));
    CL_OK(clEnqueueNDRangeKernel(q[b % nq], k, 1, NULL, &global, NULL, last[b] ? 1 : 0, last[b] ? &last[b] : NULL,
                                 &ev[i]));
    if (flush) CL_OK(clFlush(q[b % nq]));
    last[b] = ev[i];
  }
  t1 = now_us();
  calls_end(ooo ? "raw, one out-of-order queue" : "raw, in-order queues", kernels, (t1 - t0) / kernels);
  for (i = 0; i < nq; ++i) CL_OK(clFinish(q[i]));
  r->wall_ms = (now_us() - t0) / 1e3;
  r->submit_us = (t1 - t0) / kernels;
  for (i = 0; i < kernels; ++i) {
    CL_OK(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof(cl_ulong), &st[i], NULL));
    CL_OK(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof(cl_ulong), &en[i], NULL));
    CL_OK(clReleaseEvent(ev[i]));
  }
  overlap(st, en, kernels, r);
  for (b = 0; b < buffers; ++b) {
    CL_OK(clEnqueueReadBuffer(q[0], mem[b], CL_TRUE, 0, sizeof init, data[b], 0, NULL, NULL));
    CL_OK(clReleaseMemObject(mem[b]));
  }
  r->wrong = check(data);
  for (b = 0; b < buffers; ++b) free(data[b]);
  for (i = 1; i < nq; ++i) CL_OK(clReleaseCommandQueue(q[i]));
  raw_close(&e);
  free(mem);
  free(ev);
  free(last);
  free(st);
  free(en);
  free(data);
}

static void run_syrah(const char *spec, result *r) {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  syrah_buffer **buf = (syrah_buffer **)calloc((size_t)buffers, sizeof(syrah_buffer *));
  syrah_event **ev = (syrah_event **)calloc((size_t)kernels, sizeof(syrah_event *));
  cl_ulong *st = (cl_ulong *)calloc((size_t)kernels, sizeof(cl_ulong));
  cl_ulong *en = (cl_ulong *)calloc((size_t)kernels, sizeof(cl_ulong));
  cl_uint **data = (cl_uint **)calloc((size_t)buffers, sizeof(cl_uint *));
  syrah_range range = syrah_range_1d(ELEMS);
  syrah_kernel_arg args[2];
  syrah_accessor acc;
  int i, b, zero = 0;
  double t0, t1;
  if (!buf || !ev || !st || !en || !data) exit(1);
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_PROFILING, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "spin", &k));
  for (b = 0; b < buffers; ++b) {
    syrah_buffer_desc bd;
    data[b] = (cl_uint *)malloc(sizeof(cl_uint) * ELEMS);
    if (!data[b]) exit(1);
    for (i = 0; i < ELEMS; ++i) data[b][i] = (cl_uint)(b * ELEMS + i);
    memset(&bd, 0, sizeof bd);
    bd.element_size = sizeof(cl_uint);
    bd.dimensions = 1;
    bd.range[0] = ELEMS;
    bd.host_pointer = data[b];
    bd.ownership = SYRAH_HOST_COPY_IN;
    SY_OK(syrah_buffer_create(&bd, &buf[b]));
  }
  memset(&acc, 0, sizeof acc);
  acc.mode = SYRAH_ACCESS_READ_WRITE;
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&spin, sizeof spin);
  /* Put the data on the device first (zero steps leave it unchanged). */
  args[1] = syrah_arg_value(&zero, sizeof zero);
  for (b = 0; b < buffers; ++b) {
    acc.buffer = buf[b];
    SY_OK(syrah_queue_submit_kernel(q, k, &range, &acc, 1, args, 2, NULL, 0, NULL));
  }
  SY_OK(syrah_queue_wait(q));
  args[1] = syrah_arg_value(&spin, sizeof spin);
  calls_begin();
  t0 = now_us();
  for (i = 0; i < kernels; ++i) {
    acc.buffer = buf[i % buffers];
    SY_OK(syrah_queue_submit_kernel(q, k, &range, &acc, 1, args, 2, NULL, 0, &ev[i]));
  }
  t1 = now_us();
  calls_end("Syrah", kernels, (t1 - t0) / kernels);
  SY_OK(syrah_queue_wait(q));
  r->wall_ms = (now_us() - t0) / 1e3;
  r->submit_us = (t1 - t0) / kernels;
  for (i = 0; i < kernels; ++i) {
    SY_OK(syrah_event_get_profiling(ev[i], SYRAH_PROFILING_START, &st[i]));
    SY_OK(syrah_event_get_profiling(ev[i], SYRAH_PROFILING_END, &en[i]));
    SY_OK(syrah_event_release(ev[i]));
  }
  overlap(st, en, kernels, r);
  for (b = 0; b < buffers; ++b) {
    syrah_host_accessor *ha;
    cl_uint *p;
    SY_OK(syrah_buffer_host_access(buf[b], SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    memcpy(data[b], p, sizeof(cl_uint) * ELEMS);
    SY_OK(syrah_host_accessor_release(ha));
    SY_OK(syrah_buffer_release(buf[b]));
  }
  r->wrong = check(data);
  for (b = 0; b < buffers; ++b) free(data[b]);
  SY_OK(syrah_kernel_release(k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
  free(buf);
  free(ev);
  free(st);
  free(en);
  free(data);
}

static const char *spec_json = "", *name_json = "";

/* The medians of `n` rounds of one path, and whether every round was
 * right. */
static result medians(const result *r, int n) {
  double c[MAX_ROUNDS], k[MAX_ROUNDS], su[MAX_ROUNDS], w[MAX_ROUNDS], m[MAX_ROUNDS];
  result out;
  int i;
  memset(&out, 0, sizeof out);
  for (i = 0; i < n; ++i) {
    c[i] = r[i].concurrency;
    k[i] = r[i].kernel_us;
    su[i] = r[i].submit_us;
    w[i] = r[i].wall_ms;
    m[i] = r[i].max_running;
    out.wrong += r[i].wrong;
  }
  out.concurrency = median(c, n);
  out.kernel_us = median(k, n);
  out.submit_us = median(su, n);
  out.wall_ms = median(w, n);
  out.max_running = (int)median(m, n);
  return out;
}

/* One path's row; `ratio` (Syrah's only) is its wall time against the
 * better raw path's. */
static void row(const char *what, const result *r, const double *ratio) {
  char extra[64] = "";
  printf("| %s | %.2f | %d | %.1f | %.2f | %.1f | %s |\n", what, r->concurrency, r->max_running, r->kernel_us,
         r->submit_us, r->wall_ms, r->wrong ? "WRONG" : "ok");
  if (ratio) snprintf(extra, sizeof extra, ",\"wall_vs_best_raw\":%.4f", *ratio);
  bench_json("{\"bench\":\"independent\",\"device\":\"%s\",\"device_name\":\"%s\",\"path\":\"%s\","
             "\"concurrency\":%.4f,\"most_at_once\":%d,\"kernel_us\":%.3f,\"submit_us\":%.4f,\"wall_ms\":%.4f,"
             "\"rounds\":%d%s,\"ok\":%s}",
             spec_json, name_json, what, r->concurrency, r->max_running, r->kernel_us, r->submit_us, r->wall_ms,
             rounds, extra, r->wrong ? "false" : "true");
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  char name[256], line[1024];
  const syrah_device *dev;
  result raw_ooo[MAX_ROUNDS], raw_q[MAX_ROUNDS], sy[MAX_ROUNDS], m_sy, m_q, m_ooo;
  double sw[MAX_ROUNDS], best[MAX_ROUNDS], ratio, lo, hi;
  cl_platform_id plats[16];
  cl_device_id devs[16];
  cl_uint np = 0, nd = 0;
  cl_command_queue_properties qp = 0;
  int has_ooo, i, j, paths;
  if (argc > 2) kernels = atoi(argv[2]);
  if (argc > 3) buffers = atoi(argv[3]);
  if (argc > 4) spin = atoi(argv[4]);
  if (argc > 5) rounds = atoi(argv[5]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || kernels < 1 || buffers < 1 || spin < 0 || rounds < 1 ||
      rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: bench_independent P.D [kernels] [buffers] [spin] [rounds 1..16]\n");
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  spec_json = argv[1];
  name_json = name;
  if (getenv("SYRAH_BENCH_RAW_DEVICE") && sscanf(getenv("SYRAH_BENCH_RAW_DEVICE"), "%u.%u", &p, &d) != 2) {
    fprintf(stderr, "SYRAH_BENCH_RAW_DEVICE='%s' is not P.D\n", getenv("SYRAH_BENCH_RAW_DEVICE"));
    return 2;
  }
  CL_OK(clGetPlatformIDs(16, plats, &np));
  CL_OK(clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd));
  CL_OK(clGetDeviceInfo(devs[d], CL_DEVICE_QUEUE_PROPERTIES, sizeof qp, &qp, NULL));
  has_ooo = (qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
  paths = has_ooo ? 3 : 2;
  memset(raw_ooo, 0, sizeof raw_ooo);
  for (i = 0; i < rounds; ++i)
    for (j = 0; j < paths; ++j) switch ((i + j) % paths) {
        case 0:
          run_syrah(argv[1], &sy[i]);
          break;
        case 1:
          run_raw(p, d, 0, &raw_q[i]);
          break;
        default:
          run_raw(p, d, 1, &raw_ooo[i]);
      }
  for (i = 0; i < rounds; ++i) {
    sw[i] = sy[i].wall_ms;
    best[i] = raw_q[i].wall_ms;
    if (has_ooo && raw_ooo[i].wall_ms < best[i]) best[i] = raw_ooo[i].wall_ms;
  }
  ratio = median_ratio(sw, best, rounds);
  ratio_spread(sw, best, rounds, &lo, &hi);
  m_sy = medians(sy, rounds);
  m_q = medians(raw_q, rounds);
  m_ooo = medians(raw_ooo, rounds);
  printf("## %d independent kernels over %d buffers, %d steps each, device %s (%s)\n\n", kernels, buffers, spin,
         argv[1], name);
  printf("Medians of %d rounds, the paths taking turns.\n\n", rounds);
  printf("| path | concurrency | most at once | kernel µs | submit µs | wall ms | result |\n"
         "|---|---|---|---|---|---|---|\n");
  row("Syrah, out-of-order queue, accessors", &m_sy, &ratio);
  row("raw OpenCL, 4 in-order queues, events", &m_q, NULL);
  if (has_ooo)
    row("raw OpenCL, out-of-order queue, events", &m_ooo, NULL);
  else
    printf("| raw OpenCL, out-of-order queue | skipped: the device has no out-of-order queues | | | | | |\n");
  format_rounds(line, sizeof line, sw, best, rounds);
  printf("\nSyrah's wall time against the better raw path's: %.3f (median of the rounds' ratios; rounds %.3f to "
         "%.3f)\n- rounds, Syrah/raw ms: %s\n",
         ratio, lo, hi, line);
  return m_sy.wrong || m_q.wrong || (has_ooo && m_ooo.wrong);
}
