/* Command graphs against raw OpenCL and Syrah's eager path, on one device,
 * in rounds, each of which starts every workload with the next of the
 * three paths (the first path of a round can run at another speed than
 * the two after it):
 *  - chain:   1000 tiny dependent kernels (inc over 64 items of one USM
 *             allocation), issued `replays` times;
 *  - stencil: a 2D step of 4 kernels (two Jacobi-like sweeps, each
 *             followed by a border fix) over a 256 x 256 grid, issued
 *             `steps` times;
 *  - copies:  a step of 2 kernels and 2 device-to-device copies (inc a,
 *             b = a, inc b, a = b, over 64 items), issued `steps` times;
 *  - buffers: the stencil on two buffers through accessors (Syrah infers
 *             the order), against raw OpenCL on two cl_mem, `steps` times.
 * raw:   an in-order OpenCL queue, each command's arguments set and the
 *        command enqueued one by one (an SVM pointer where Syrah's USM is
 *        SVM, else a cl_mem), one flush per replay, as hand-written code
 *        does;
 * eager: the same launches through syrah_queue_launch on an in-order queue;
 * graph: the launches recorded once from that queue, finalized, and the
 *        graph submitted per replay.
 * Each round issues the replays twice: back to back, timing from the first
 * issue until everything finished (wall µs per command), then one at a
 * time, timing only the issuing and waiting for each replay untimed
 * (submit µs per command: the host's cost, not held up by drivers that
 * block an enqueue while their queue is full). Reported: the graph's
 * ratios to raw, and the eager launch minus raw. Results are checked
 * exactly.
 *
 * usage: bench_graph P.D [replays] [steps] [rounds] */
#include "bench_common.h"

static const char *source =
    "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n"
    "__kernel void sweep(__global const int *s, __global int *d, int w)\n"
    "{ int x = (int)get_global_id(0) + 1, y = (int)get_global_id(1) + 1;\n"
    "  d[y * w + x] = (s[y * w + x] * 4 + s[(y - 1) * w + x] + s[(y + 1) * w + x]\n"
    "                 + s[y * w + x - 1] + s[y * w + x + 1]) % 1000003; }\n"
    "__kernel void border(__global int *d, int w)\n"
    "{ int i = (int)get_global_id(0); d[i] = 1; d[(w - 1) * w + i] = 1; d[i * w] = 1; d[i * w + w - 1] = 1; }\n";

enum { ELEMS = 64, CHAIN = 1000, W = 256 };

static int replays = 100, steps = 1000, rounds = 5, svm = 0;
static unsigned plat, devi;
static const char *spec;

typedef struct {
  double submit, wall;
  long check;
} run;

/* Issues `n` replays of `per` commands each through `issue(ctx)`, with
 * `finish(ctx)` waiting for everything: first back to back (wall µs per
 * command, first issue to the end), then one at a time with each finish
 * untimed (submit µs per command). With libsyrah_clcalls.so loaded, the
 * OpenCL calls of the back-to-back issues are printed under `label`. */
static void timed(const char *label, int n, int per, void (*issue)(void *), void (*finish)(void *), void *ctx,
                  run *out) {
  double t0, issued, spent = 0;
  int j;
  finish(ctx);
  calls_begin();
  t0 = now_us();
  for (j = 0; j < n; ++j) issue(ctx);
  issued = now_us();
  calls_end(label, n * per, (issued - t0) / ((double)n * per));
  finish(ctx);
  out->wall = (now_us() - t0) / ((double)n * per);
  for (j = 0; j < n; ++j) {
    t0 = now_us();
    issue(ctx);
    spent += now_us() - t0;
    finish(ctx);
  }
  out->submit = spent / ((double)n * per);
}

/* ---- raw OpenCL ---------------------------------------------------------- */

typedef struct {
  cl_context ctx;
  cl_device_id dev;
  cl_command_queue q;
  cl_program prog;
  cl_kernel inc, sweep, border;
  /* For cl_mem arguments where the others take SVM pointers: NVIDIA's
   * OpenCL refuses to launch a kernel whose argument went from an SVM
   * pointer to a cl_mem. */
  cl_kernel sweep_mem, border_mem;
  int flush; /* flushes each replay (see raw_flushes) */
} raw_t;

static void raw_open_all(raw_t *r) {
  raw_env e;
  cl_int err;
  raw_open(plat, devi, 0, source, "inc", &e);
  r->ctx = e.ctx;
  r->dev = e.dev;
  r->q = e.q;
  r->prog = e.prog;
  r->inc = e.k;
  r->flush = raw_flushes(e.dev);
  r->sweep = clCreateKernel(r->prog, "sweep", &err);
  CL_OK(err);
  r->border = clCreateKernel(r->prog, "border", &err);
  CL_OK(err);
  r->sweep_mem = clCreateKernel(r->prog, "sweep", &err);
  CL_OK(err);
  r->border_mem = clCreateKernel(r->prog, "border", &err);
  CL_OK(err);
}

static void raw_close_all(raw_t *r) {
  raw_env e = {r->ctx, r->dev, r->q, r->prog, r->inc};
  CL_OK(clReleaseKernel(r->sweep));
  CL_OK(clReleaseKernel(r->border));
  CL_OK(clReleaseKernel(r->sweep_mem));
  CL_OK(clReleaseKernel(r->border_mem));
  raw_close(&e);
}

/* Memory for the raw side: an SVM pointer or a cl_mem. */
typedef struct {
  void *svm;
  cl_mem mem;
} raw_mem;

static raw_mem raw_alloc(raw_t *r, size_t bytes, const void *init) {
  raw_mem m = {NULL, NULL};
  cl_int err;
  if (svm) {
    m.svm = clSVMAlloc(r->ctx, CL_MEM_READ_WRITE, bytes, 0);
    if (!m.svm) {
      fprintf(stderr, "clSVMAlloc failed\n");
      exit(1);
    }
    CL_OK(clEnqueueSVMMemcpy(r->q, CL_TRUE, m.svm, init, bytes, 0, NULL, NULL));
  } else {
    m.mem = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)init, &err);
    CL_OK(err);
  }
  return m;
}

static void raw_arg(cl_kernel k, cl_uint i, raw_mem *m) {
  if (svm)
    CL_OK(clSetKernelArgSVMPointer(k, i, m->svm));
  else
    CL_OK(clSetKernelArg(k, i, sizeof m->mem, &m->mem));
}

static void raw_copy(raw_t *r, raw_mem *d, raw_mem *src, size_t bytes) {
  if (svm)
    CL_OK(clEnqueueSVMMemcpy(r->q, CL_FALSE, d->svm, src->svm, bytes, 0, NULL, NULL));
  else
    CL_OK(clEnqueueCopyBuffer(r->q, src->mem, d->mem, 0, 0, bytes, 0, NULL, NULL));
}

static void raw_read(raw_t *r, raw_mem *m, void *out, size_t bytes) {
  if (svm) {
    CL_OK(clEnqueueSVMMemcpy(r->q, CL_TRUE, out, m->svm, bytes, 0, NULL, NULL));
    clSVMFree(r->ctx, m->svm);
  } else {
    CL_OK(clEnqueueReadBuffer(r->q, m->mem, CL_TRUE, 0, bytes, out, 0, NULL, NULL));
    CL_OK(clReleaseMemObject(m->mem));
  }
}

typedef struct {
  raw_t *r;
  raw_mem a, b;
} raw_job;

static void raw_finish(void *p) { CL_OK(clFinish(((raw_job *)p)->r->q)); }

static void raw_chain_issue(void *p) {
  raw_job *x = (raw_job *)p;
  size_t g = ELEMS;
  int i;
  for (i = 0; i < CHAIN; ++i) {
    raw_arg(x->r->inc, 0, &x->a);
    CL_OK(clEnqueueNDRangeKernel(x->r->q, x->r->inc, 1, NULL, &g, NULL, 0, NULL, NULL));
  }
  if (x->r->flush) CL_OK(clFlush(x->r->q));
}

static void raw_chain(raw_t *r, run *out) {
  int host[ELEMS] = {0};
  raw_job x;
  x.r = r;
  x.a = raw_alloc(r, sizeof host, host);
  timed("raw chain", replays, CHAIN, raw_chain_issue, raw_finish, &x, out);
  raw_read(r, &x.a, host, sizeof host);
  out->check = host[0] + host[ELEMS - 1];
}

/* inc a; b = a; inc b; a = b. */
static void raw_copies_issue(void *p) {
  raw_job *x = (raw_job *)p;
  size_t g = ELEMS;
  raw_arg(x->r->inc, 0, &x->a);
  CL_OK(clEnqueueNDRangeKernel(x->r->q, x->r->inc, 1, NULL, &g, NULL, 0, NULL, NULL));
  raw_copy(x->r, &x->b, &x->a, ELEMS * sizeof(int));
  raw_arg(x->r->inc, 0, &x->b);
  CL_OK(clEnqueueNDRangeKernel(x->r->q, x->r->inc, 1, NULL, &g, NULL, 0, NULL, NULL));
  raw_copy(x->r, &x->a, &x->b, ELEMS * sizeof(int));
  if (x->r->flush) CL_OK(clFlush(x->r->q));
}

static int grid0[W * W];

/* sweep(s -> d), then border(d). */
static void raw_half_step(raw_t *r, raw_mem *s, raw_mem *d) {
  size_t inner[2] = {W - 2, W - 2}, edge = W;
  int w = W;
  raw_arg(r->sweep, 0, s);
  raw_arg(r->sweep, 1, d);
  CL_OK(clSetKernelArg(r->sweep, 2, sizeof w, &w));
  CL_OK(clEnqueueNDRangeKernel(r->q, r->sweep, 2, NULL, inner, NULL, 0, NULL, NULL));
  raw_arg(r->border, 0, d);
  CL_OK(clSetKernelArg(r->border, 1, sizeof w, &w));
  CL_OK(clEnqueueNDRangeKernel(r->q, r->border, 1, NULL, &edge, NULL, 0, NULL, NULL));
}

static void raw_stencil_issue(void *p) {
  raw_job *x = (raw_job *)p;
  raw_half_step(x->r, &x->a, &x->b);
  raw_half_step(x->r, &x->b, &x->a);
  if (x->r->flush) CL_OK(clFlush(x->r->q));
}

/* The stencil and the copies work on two allocations of `bytes` starting
 * as `init`, issued `steps` times, 4 commands each; `check` sums a few of
 * the first allocation's results. */
static const int zeros[ELEMS];

static long check_elems(const int *h) { return h[0] + h[ELEMS - 1]; }

static long check_grid(const int *h) {
  return (long)h[W + 1] + h[(W / 2) * W + W / 2] + h[(W - 2) * W + W - 2];
}

static void raw_two(raw_t *r, run *out, const int *init, size_t bytes, void (*issue)(void *),
                    long (*check)(const int *)) {
  static int host[W * W];
  raw_job x;
  x.r = r;
  x.a = raw_alloc(r, bytes, init);
  x.b = raw_alloc(r, bytes, init);
  timed(issue == raw_stencil_issue ? (svm ? "raw stencil" : "raw stencil on cl_mem") : "raw copies", steps, 4, issue,
        raw_finish, &x, out);
  raw_read(r, &x.b, host, bytes);
  raw_read(r, &x.a, host, bytes);
  out->check = check(host);
}

/* ---- Syrah ----------------------------------------------------------------- */

typedef struct {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *inc, *sweep, *border;
} sy_t;

static void sy_open_all(sy_t *s) {
  SY_OK(syrah_device_select_by_string(spec, &s->dev));
  SY_OK(syrah_queue_create(NULL, s->dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &s->q));
  SY_OK(syrah_queue_get_context(s->q, &s->ctx));
  SY_OK(syrah_program_create_from_source(s->ctx, source, NULL, &s->prog));
  SY_OK(syrah_kernel_create(s->prog, "inc", &s->inc));
  SY_OK(syrah_kernel_create(s->prog, "sweep", &s->sweep));
  SY_OK(syrah_kernel_create(s->prog, "border", &s->border));
}

static void sy_close_all(sy_t *s) {
  SY_OK(syrah_kernel_release(s->inc));
  SY_OK(syrah_kernel_release(s->sweep));
  SY_OK(syrah_kernel_release(s->border));
  SY_OK(syrah_program_release(s->prog));
  SY_OK(syrah_context_release(s->ctx));
  SY_OK(syrah_queue_release(s->q));
}

static void sy_chain_cmds(sy_t *s, int *p, int *unused) {
  syrah_range r = syrah_range_1d(ELEMS);
  syrah_kernel_arg a = syrah_arg_usm(p);
  int i;
  (void)unused;
  for (i = 0; i < CHAIN; ++i) SY_OK(syrah_queue_launch(s->q, s->inc, &r, &a, 1, NULL, 0, NULL));
}

static void sy_stencil_cmds(sy_t *s, int *a, int *b) {
  syrah_range inner = syrah_range_2d(W - 2, W - 2), edge = syrah_range_1d(W);
  int w = W;
  syrah_kernel_arg args[3];
  args[2] = syrah_arg_value(&w, sizeof w);
  args[0] = syrah_arg_usm(a);
  args[1] = syrah_arg_usm(b);
  SY_OK(syrah_queue_launch(s->q, s->sweep, &inner, args, 3, NULL, 0, NULL));
  args[0] = syrah_arg_usm(b);
  args[1] = args[2];
  SY_OK(syrah_queue_launch(s->q, s->border, &edge, args, 2, NULL, 0, NULL));
  args[0] = syrah_arg_usm(b);
  args[1] = syrah_arg_usm(a);
  args[2] = syrah_arg_value(&w, sizeof w);
  SY_OK(syrah_queue_launch(s->q, s->sweep, &inner, args, 3, NULL, 0, NULL));
  args[0] = syrah_arg_usm(a);
  args[1] = args[2];
  SY_OK(syrah_queue_launch(s->q, s->border, &edge, args, 2, NULL, 0, NULL));
}

static void sy_copies_cmds(sy_t *s, int *a, int *b) {
  syrah_range r = syrah_range_1d(ELEMS);
  syrah_kernel_arg x = syrah_arg_usm(a);
  SY_OK(syrah_queue_launch(s->q, s->inc, &r, &x, 1, NULL, 0, NULL));
  SY_OK(syrah_queue_memcpy(s->q, b, a, ELEMS * sizeof(int), NULL, 0, NULL));
  x = syrah_arg_usm(b);
  SY_OK(syrah_queue_launch(s->q, s->inc, &r, &x, 1, NULL, 0, NULL));
  SY_OK(syrah_queue_memcpy(s->q, a, b, ELEMS * sizeof(int), NULL, 0, NULL));
}

/* The buffers workload's two grids: the stencil through accessors. */
static syrah_buffer *grids[2];

/* sweep(s -> d), then border(d), through accessors. */
static void sy_half_step_buffers(sy_t *s, syrah_buffer *src, syrah_buffer *dst) {
  syrah_range inner = syrah_range_2d(W - 2, W - 2), edge = syrah_range_1d(W);
  int w = W;
  syrah_accessor acc[2];
  syrah_kernel_arg args[3] = {{SYRAH_ARG_ACCESSOR, 0, NULL}, {SYRAH_ARG_ACCESSOR, 1, NULL}, {0, 0, NULL}};
  memset(acc, 0, sizeof acc);
  acc[0].buffer = src;
  acc[0].mode = SYRAH_ACCESS_READ;
  acc[1].buffer = dst;
  acc[1].mode = SYRAH_ACCESS_WRITE;
  args[2] = syrah_arg_value(&w, sizeof w);
  SY_OK(syrah_queue_submit_kernel(s->q, s->sweep, &inner, acc, 2, args, 3, NULL, 0, NULL));
  acc[0].buffer = dst;
  acc[0].mode = SYRAH_ACCESS_WRITE;
  args[1] = syrah_arg_value(&w, sizeof w);
  SY_OK(syrah_queue_submit_kernel(s->q, s->border, &edge, acc, 1, args, 2, NULL, 0, NULL));
}

static void sy_buffers_cmds(sy_t *s, int *unused_a, int *unused_b) {
  (void)unused_a;
  (void)unused_b;
  sy_half_step_buffers(s, grids[0], grids[1]);
  sy_half_step_buffers(s, grids[1], grids[0]);
}

/* What a Syrah replay issues: the recorded graph when `x` is set, else
 * the commands `cmds` issues on `a` and `b`, eagerly. */
typedef struct {
  sy_t *s;
  syrah_graph_exec *x;
  int *a, *b;
  void (*cmds)(sy_t *, int *, int *);
} sy_job;

static void sy_finish(void *p) { SY_OK(syrah_queue_wait(((sy_job *)p)->s->q)); }

static void sy_issue(void *p) {
  sy_job *j = (sy_job *)p;
  if (j->x)
    SY_OK(syrah_queue_submit_graph(j->s->q, j->x, NULL, 0, NULL));
  else
    j->cmds(j->s, j->a, j->b);
}

/* Records what the job's commands submit once, as a graph. */
static syrah_graph_exec *record(sy_job *j, syrah_graph **g) {
  syrah_graph_exec *x = NULL;
  SY_OK(syrah_queue_begin_recording(j->s->q));
  sy_issue(j);
  SY_OK(syrah_queue_end_recording(j->s->q, g));
  SY_OK(syrah_graph_finalize(*g, &x));
  return x;
}

/* The back end a graph kept after its first submissions timed both, and
 * the graph released. */
static void done_with(syrah_graph_exec *x, syrah_graph *g, int *backend) {
  syrah_graph_backend kept = 0;
  SY_OK(syrah_graph_exec_get_backend(x, &kept));
  *backend = (int)kept;
  SY_OK(syrah_graph_exec_release(x));
  SY_OK(syrah_graph_release(g));
}

/* `graph`: record once and submit per replay; else issue eagerly. */
static void sy_chain(sy_t *s, int graph, run *out, int *backend) {
  int host[ELEMS] = {0};
  syrah_graph *g = NULL;
  sy_job j = {s, NULL, NULL, NULL, sy_chain_cmds};
  SY_OK(syrah_malloc_device(s->ctx, s->dev, sizeof host, (void **)&j.a));
  SY_OK(syrah_queue_memcpy(s->q, j.a, host, sizeof host, NULL, 0, NULL));
  if (graph) j.x = record(&j, &g);
  timed(graph ? "graph chain" : "eager chain", replays, CHAIN, sy_issue, sy_finish, &j, out);
  SY_OK(syrah_queue_memcpy(s->q, host, j.a, sizeof host, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(s->q));
  out->check = host[0] + host[ELEMS - 1];
  if (graph) done_with(j.x, g, backend);
  SY_OK(syrah_free(s->ctx, j.a));
}

static void sy_two(sy_t *s, int graph, run *out, int *backend, const int *init, size_t bytes,
                   void (*cmds)(sy_t *, int *, int *), long (*check)(const int *)) {
  static int host[W * W];
  syrah_graph *g = NULL;
  sy_job j = {s, NULL, NULL, NULL, cmds};
  SY_OK(syrah_malloc_device(s->ctx, s->dev, bytes, (void **)&j.a));
  SY_OK(syrah_malloc_device(s->ctx, s->dev, bytes, (void **)&j.b));
  SY_OK(syrah_queue_memcpy(s->q, j.a, init, bytes, NULL, 0, NULL));
  SY_OK(syrah_queue_memcpy(s->q, j.b, init, bytes, NULL, 0, NULL));
  if (graph) j.x = record(&j, &g);
  timed(cmds == sy_stencil_cmds ? (graph ? "graph stencil" : "eager stencil") : (graph ? "graph copies" : "eager copies"), steps, 4, sy_issue, sy_finish, &j, out);
  SY_OK(syrah_queue_memcpy(s->q, host, j.a, bytes, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(s->q));
  out->check = check(host);
  if (graph) done_with(j.x, g, backend);
  SY_OK(syrah_free(s->ctx, j.a));
  SY_OK(syrah_free(s->ctx, j.b));
}

/* The stencil on two buffers made from `grid0`, through accessors. */
static void sy_buffers(sy_t *s, int graph, run *out, int *backend) {
  static int host[W * W];
  syrah_graph *g = NULL;
  sy_job j = {s, NULL, NULL, NULL, sy_buffers_cmds};
  size_t origin[3] = {0, 0, 0}, range[3] = {W * W, 0, 0};
  int k;
  for (k = 0; k < 2; ++k) {
    syrah_buffer_desc bd = syrah_buffer_desc_1d(sizeof(int), W * W, grid0, SYRAH_HOST_COPY_IN);
    SY_OK(syrah_buffer_create(&bd, &grids[k]));
  }
  {
    /* Both grids onto the device before timing, as the raw side's buffers
     * are made there: a copy between the equal grids changes nothing. */
    syrah_accessor from, to;
    memset(&from, 0, sizeof from);
    memset(&to, 0, sizeof to);
    from.buffer = grids[0];
    from.mode = SYRAH_ACCESS_READ;
    to.buffer = grids[1];
    to.mode = SYRAH_ACCESS_WRITE;
    SY_OK(syrah_queue_copy_accessor(s->q, &from, &to, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(s->q));
  }
  if (graph) j.x = record(&j, &g);
  timed(graph ? "graph buffers" : "eager buffers", steps, 4, sy_issue, sy_finish, &j, out);
  SY_OK(syrah_buffer_read(grids[0], origin, range, host));
  out->check = check_grid(host);
  if (graph) done_with(j.x, g, backend);
  for (k = 0; k < 2; ++k) SY_OK(syrah_buffer_release(grids[k]));
}

static double med_of(const run *v, int n, int wall) {
  double x[64];
  int i;
  for (i = 0; i < n; ++i) x[i] = wall ? v[i].wall : v[i].submit;
  return median(x, n);
}

static double med_diff(const run *a, const run *b, int n) {
  double x[64];
  int i;
  for (i = 0; i < n; ++i) x[i] = a[i].submit - b[i].submit;
  return median(x, n);
}

/* `rows`: the table's two rows, else the summary line and the JSON record;
 * the issue's targets are judged for the chain and the stencil only. */
static int report(int rows, int targeted, const char *what, const run *raw, const run *eager, const run *graph, int n,
                  int backend) {
  double rs = med_of(raw, n, 0), es = med_of(eager, n, 0), gs = med_of(graph, n, 0);
  double rw = med_of(raw, n, 1), ew = med_of(eager, n, 1), gw = med_of(graph, n, 1);
  double diff = med_diff(eager, raw, n);
  int i, ok = 1;
  for (i = 0; i < n; ++i) ok &= raw[i].check == eager[i].check && raw[i].check == graph[i].check;
  if (rows) {
    printf("| %s | submit µs/cmd | %.3f | %.3f | %.3f | %.3f | %+.3f |\n", what, rs, es, gs, gs / rs, diff);
    printf("| %s | wall µs/cmd | %.3f | %.3f | %.3f | %.3f | |\n", what, rw, ew, gw, gw / rw);
    return ok;
  }
  {
    const char *g_ok = gs / rs <= 0.5 ? " (target <= 0.5: met)" : " (target <= 0.5: NOT met)";
    const char *e_ok = diff <= 1.0 ? " (target <= +1: met)" : " (target <= +1: NOT met)";
    printf("%s: graph back end kept %s; graph submit / raw submit %.3f%s; eager - raw %+.3f µs%s; results %s\n",
           what, backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "command-buffer" : "replay", gs / rs,
           targeted ? g_ok : "", diff, targeted ? e_ok : "", ok ? "equal" : "DIFFER");
  }
  bench_json("{\"bench\":\"graph\",\"device\":\"%s\",\"what\":\"%s\",\"backend\":\"%s\",\"raw_submit_us\":%.4f,"
             "\"eager_submit_us\":%.4f,\"graph_submit_us\":%.4f,\"raw_wall_us\":%.4f,\"eager_wall_us\":%.4f,"
             "\"graph_wall_us\":%.4f,\"graph_over_raw\":%.4f,\"eager_minus_raw_us\":%.4f,\"rounds\":%d,\"ok\":%s}",
             spec, what, backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "command-buffer" : "replay", rs, es, gs,
             rw, ew, gw, gs / rs, diff, n, ok ? "true" : "false");
  return ok;
}

/* Runs path `path` (0 raw, 1 eager, 2 graph) of workload `w` in round
 * `i`. */
static void run_path(int w, int path, int i, raw_t *r, sy_t *s, run (*raw)[64], run (*eager)[64], run (*graph)[64],
                     int *backend) {
  const int *init = w == 2 ? zeros : grid0;
  size_t bytes = w == 2 ? sizeof zeros : sizeof grid0;
  void (*raw_issue)(void *) = w == 2 ? raw_copies_issue : raw_stencil_issue;
  void (*cmds)(sy_t *, int *, int *) = w == 2 ? sy_copies_cmds : sy_stencil_cmds;
  long (*check)(const int *) = w == 2 ? check_elems : check_grid;
  run *out = path == 0 ? &raw[w][i] : path == 1 ? &eager[w][i] : &graph[w][i];
  int *be = path == 2 ? &backend[w] : NULL;
  if (w == 0) {
    if (path == 0)
      raw_chain(r, out);
    else
      sy_chain(s, path == 2, out, be);
  } else if (w == 3) {
    if (path == 0) {
      /* The raw side of the buffers workload uses cl_mem whatever USM
       * is, on kernels of its own. */
      int raw_svm = svm;
      raw_t rm = *r;
      svm = 0;
      rm.sweep = r->sweep_mem;
      rm.border = r->border_mem;
      raw_two(&rm, out, grid0, sizeof grid0, raw_stencil_issue, check_grid);
      svm = raw_svm;
    } else {
      sy_buffers(s, path == 2, out, be);
    }
  } else if (path == 0) {
    raw_two(r, out, init, bytes, raw_issue, check);
  } else {
    sy_two(s, path == 2, out, be, init, bytes, cmds, check);
  }
}

int main(int argc, char **argv) {
  run raw[4][64], eager[4][64], graph[4][64];
  int i, ok = 1, backend[4] = {0, 0, 0, 0};
  raw_t r;
  sy_t s;
  const syrah_device *dev;
  char strategy[64] = "";
  if (argc < 2 || sscanf(argv[1], "%u.%u", &plat, &devi) != 2) {
    fprintf(stderr, "usage: bench_graph P.D [replays] [steps] [rounds]\n");
    return 2;
  }
  spec = argv[1];
  if (argc > 2) replays = atoi(argv[2]);
  if (argc > 3) steps = atoi(argv[3]);
  if (argc > 4) rounds = atoi(argv[4]);
  if (replays < 1 || steps < 1 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "replays and steps must be positive, rounds 1 to 64\n");
    return 2;
  }
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, strategy, sizeof strategy, NULL));
  svm = strcmp(strategy, "svm") == 0;
  for (i = 0; i < W * W; ++i) grid0[i] = (i * 7919) % 1000;
  raw_open_all(&r);
  sy_open_all(&s);
  /* Each round starts each workload with the next path: the first path
   * of a round can run faster or slower than the others (measured on
   * PoCL), and so each path is first as often as the others. */
  for (i = 0; i < rounds; ++i) {
    int w, k;
    for (w = 0; w < 4; ++w)
      for (k = 0; k < 3; ++k) run_path(w, (i + k) % 3, i, &r, &s, raw, eager, graph, backend);
  }
  printf("## Graphs on %s (raw %s), medians of %d rounds, the paths taking turns\n\n", spec, svm ? "SVM" : "cl_mem", rounds);
  printf("| workload | measure | raw | eager | graph | graph / raw | eager - raw µs |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  {
    char a[64], b[64], c[64], d[80];
    snprintf(a, sizeof a, "chain of %d kernels x %d", CHAIN, replays);
    snprintf(b, sizeof b, "stencil step of 4 kernels x %d", steps);
    snprintf(c, sizeof c, "step of 2 kernels and 2 device copies x %d", steps);
    snprintf(d, sizeof d, "stencil step on buffers (raw cl_mem) x %d", steps);
    report(1, 1, a, raw[0], eager[0], graph[0], rounds, backend[0]);
    report(1, 1, b, raw[1], eager[1], graph[1], rounds, backend[1]);
    report(1, 0, c, raw[2], eager[2], graph[2], rounds, backend[2]);
    report(1, 0, d, raw[3], eager[3], graph[3], rounds, backend[3]);
    printf("\n");
    ok &= report(0, 1, a, raw[0], eager[0], graph[0], rounds, backend[0]);
    ok &= report(0, 1, b, raw[1], eager[1], graph[1], rounds, backend[1]);
    ok &= report(0, 0, c, raw[2], eager[2], graph[2], rounds, backend[2]);
    ok &= report(0, 0, d, raw[3], eager[3], graph[3], rounds, backend[3]);
  }
  raw_close_all(&r);
  sy_close_all(&s);
  if (!ok) {
    fprintf(stderr, "bench_graph: results differ between raw, eager and graph\n");
    return 1;
  }
  return 0;
}
