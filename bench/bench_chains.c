/* Chains of dependent commands, Syrah against raw OpenCL on one device:
 *  - usm:    K tiny kernels on an in-order queue over one USM allocation,
 *            against an in-order OpenCL queue with the kernel's argument
 *            set per launch (an SVM pointer where Syrah's USM is SVM,
 *            else a cl_mem);
 *  - buffer: K tiny kernels through one buffer, ordered only by their
 *            read_write accessors on an out-of-order queue, against an
 *            in-order OpenCL queue with a cl_mem;
 *  - host:   K host tasks on an in-order queue, each after the previous,
 *            against a chain of OpenCL user events, each completed by a
 *            host thread once the previous one's completion callback
 *            has signalled it (the function runs on that thread).
 * For each: host microseconds per submission, and wall microseconds per
 * command from the first submission until the last has finished. The
 * kernels add 1 to every element, so the result is checked exactly. The
 * kernel chains run `rounds` times, Syrah and raw alternating (each first
 * in every other round), and report
 * medians (with the median of the per-round differences): machines drift
 * between runs by more than the differences measured.
 *
 * usage: bench_chains P.D [commands] [rounds] */
#include "bench_common.h"

#include <pthread.h>

static const char *source = "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n";

enum { ELEMS = 64 };

typedef struct {
  double submit_us, wall_us;
  int ok;
} result;

static int commands = 10000, rounds = 3;

/* Raw kernel chain on an in-order queue; `svm` passes an SVM pointer. */
static void raw_kernels(unsigned p, unsigned d, int svm, result *r) {
  raw_env e;
  cl_int err;
  cl_mem m = NULL;
  int *s = NULL, host[ELEMS], i, flush;
  size_t global = ELEMS;
  double t0, t1;
  raw_open(p, d, 0, source, "inc", &e);
  flush = raw_flushes(e.dev);
  memset(host, 0, sizeof host);
  if (svm) {
    s = (int *)clSVMAlloc(e.ctx, CL_MEM_READ_WRITE, sizeof host, 0);
    if (!s) {
      fprintf(stderr, "clSVMAlloc failed\n");
      exit(1);
    }
    CL_OK(clEnqueueSVMMemcpy(e.q, CL_TRUE, s, host, sizeof host, 0, NULL, NULL));
  } else {
    m = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
    CL_OK(err);
  }
  CL_OK(clFinish(e.q));
  calls_begin();
  t0 = now_us();
  for (i = 0; i < commands; ++i) {
    if (svm)
      CL_OK(clSetKernelArgSVMPointer(e.k, 0, s));
    else
      CL_OK(clSetKernelArg(e.k, 0, sizeof m, &m));
    CL_OK(clEnqueueNDRangeKernel(e.q, e.k, 1, NULL, &global, NULL, 0, NULL, NULL));
    if (flush) CL_OK(clFlush(e.q));
  }
  t1 = now_us();
  calls_end("raw kernels", commands, (t1 - t0) / commands);
  CL_OK(clFinish(e.q));
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  if (svm) {
    CL_OK(clEnqueueSVMMemcpy(e.q, CL_TRUE, host, s, sizeof host, 0, NULL, NULL));
    clSVMFree(e.ctx, s);
  } else {
    CL_OK(clEnqueueReadBuffer(e.q, m, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL));
    clReleaseMemObject(m);
  }
  r->ok = host[0] == commands && host[ELEMS - 1] == commands;
  raw_close(&e);
}

/* Raw host chain: the same function runs on a host thread after each
 * user event's completion callback signals it, and that thread completes
 * the next event (completing it from inside the callback would nest the
 * callbacks on drivers that run them at once, 10,000 deep). */
typedef struct {
  int count;
  pthread_mutex_t lock;
  pthread_cond_t signalled;
  int pending;
} host_chain;

static void CL_CALLBACK raw_signal(cl_event ev, cl_int status, void *user) {
  host_chain *c = (host_chain *)user;
  (void)ev;
  (void)status;
  pthread_mutex_lock(&c->lock);
  ++c->pending;
  pthread_cond_signal(&c->signalled);
  pthread_mutex_unlock(&c->lock);
}

static void raw_host(unsigned p, unsigned d, result *r) {
  raw_env e;
  host_chain c;
  cl_int err;
  cl_event *events = (cl_event *)calloc((size_t)commands, sizeof(cl_event));
  int i;
  double t0, t1;
  if (!events) exit(1);
  raw_open(p, d, 0, source, "inc", &e);
  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.lock, NULL);
  pthread_cond_init(&c.signalled, NULL);
  t0 = now_us();
  for (i = 0; i < commands; ++i) {
    events[i] = clCreateUserEvent(e.ctx, &err);
    CL_OK(err);
    CL_OK(clSetEventCallback(events[i], CL_COMPLETE, raw_signal, &c));
  }
  t1 = now_us();
  for (i = 0; i < commands; ++i) {
    CL_OK(clSetUserEventStatus(events[i], CL_COMPLETE));
    pthread_mutex_lock(&c.lock);
    while (c.pending == 0) pthread_cond_wait(&c.signalled, &c.lock);
    --c.pending;
    pthread_mutex_unlock(&c.lock);
    ++c.count; /* the task */
  }
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  r->ok = c.count == commands;
  for (i = 0; i < commands; ++i) clReleaseEvent(events[i]);
  free(events);
  pthread_mutex_destroy(&c.lock);
  pthread_cond_destroy(&c.signalled);
  raw_close(&e);
}

typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
} sy_env;

static void sy_open(const char *spec, unsigned flags, sy_env *e) {
  const syrah_device *dev;
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, flags, NULL, NULL, &e->q));
  SY_OK(syrah_queue_get_context(e->q, &e->ctx));
  SY_OK(syrah_program_create_from_source(e->ctx, source, NULL, &e->prog));
  SY_OK(syrah_kernel_create(e->prog, "inc", &e->k));
}

static void sy_close(sy_env *e) {
  SY_OK(syrah_kernel_release(e->k));
  SY_OK(syrah_program_release(e->prog));
  SY_OK(syrah_context_release(e->ctx));
  SY_OK(syrah_queue_release(e->q));
}

static void sy_usm(const char *spec, result *r) {
  sy_env e;
  const syrah_device *dev;
  int *m = NULL, host[ELEMS], i;
  syrah_range range = syrah_range_1d(ELEMS);
  syrah_kernel_arg arg;
  double t0, t1;
  sy_open(spec, SYRAH_QUEUE_IN_ORDER, &e);
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_malloc_device(e.ctx, dev, sizeof host, (void **)&m));
  memset(host, 0, sizeof host);
  SY_OK(syrah_queue_memcpy(e.q, m, host, sizeof host, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(e.q));
  arg = syrah_arg_usm(m);
  calls_begin();
  t0 = now_us();
  for (i = 0; i < commands; ++i) SY_OK(syrah_queue_launch(e.q, e.k, &range, &arg, 1, NULL, 0, NULL));
  t1 = now_us();
  calls_end("Syrah USM kernels", commands, (t1 - t0) / commands);
  SY_OK(syrah_queue_wait(e.q));
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  SY_OK(syrah_queue_memcpy(e.q, host, m, sizeof host, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(e.q));
  r->ok = host[0] == commands && host[ELEMS - 1] == commands;
  SY_OK(syrah_free(e.ctx, m));
  sy_close(&e);
}

static void sy_buffer(const char *spec, result *r) {
  sy_env e;
  syrah_buffer *b;
  syrah_buffer_desc bd;
  syrah_accessor acc;
  syrah_kernel_arg arg;
  syrah_host_accessor *ha;
  syrah_range range = syrah_range_1d(ELEMS);
  int host[ELEMS], *p = NULL, i;
  double t0, t1;
  sy_open(spec, 0, &e);
  memset(host, 0, sizeof host);
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 1;
  bd.range[0] = ELEMS;
  bd.host_pointer = host;
  bd.ownership = SYRAH_HOST_COPY_IN;
  SY_OK(syrah_buffer_create(&bd, &b));
  memset(&acc, 0, sizeof acc);
  acc.buffer = b;
  acc.mode = SYRAH_ACCESS_READ_WRITE;
  arg.kind = SYRAH_ARG_ACCESSOR;
  arg.size = 0;
  arg.value = NULL;
  /* The first kernel moves the data; the chain then runs on the device. */
  SY_OK(syrah_queue_submit_kernel(e.q, e.k, &range, &acc, 1, &arg, 1, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(e.q));
  calls_begin();
  t0 = now_us();
  for (i = 0; i < commands; ++i) SY_OK(syrah_queue_submit_kernel(e.q, e.k, &range, &acc, 1, &arg, 1, NULL, 0, NULL));
  t1 = now_us();
  calls_end("Syrah buffer kernels", commands, (t1 - t0) / commands);
  SY_OK(syrah_queue_wait(e.q));
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  SY_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  r->ok = p && p[0] == commands + 1 && p[ELEMS - 1] == commands + 1;
  SY_OK(syrah_host_accessor_release(ha));
  SY_OK(syrah_buffer_release(b));
  sy_close(&e);
}

static int host_count = 0;
static syrah_status sy_task(const syrah_host_task_context *ctx, void *user) {
  (void)ctx;
  (void)user;
  ++host_count;
  return SYRAH_SUCCESS;
}

static void sy_host(const char *spec, result *r) {
  sy_env e;
  syrah_host_task task;
  int i;
  double t0, t1;
  sy_open(spec, SYRAH_QUEUE_IN_ORDER, &e);
  memset(&task, 0, sizeof task);
  task.run = sy_task;
  t0 = now_us();
  for (i = 0; i < commands; ++i) SY_OK(syrah_queue_submit_host_tasks(e.q, NULL, 0, &task, 1, NULL, 0, NULL));
  t1 = now_us();
  SY_OK(syrah_queue_wait(e.q));
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  r->ok = host_count == commands;
  sy_close(&e);
}

static const char *spec_json = "", *name_json = "";

static void row(const char *what, const result *sy, const result *raw, double diff, int n) {
  printf("| %s | %.2f | %.2f | %+.2f | %.2f | %.2f | %d | %s |\n", what, sy->submit_us, raw->submit_us, diff,
         sy->wall_us, raw->wall_us, n, sy->ok && raw->ok ? "ok" : "WRONG");
  bench_json("{\"bench\":\"chains\",\"device\":\"%s\",\"device_name\":\"%s\",\"chain\":\"%s\","
             "\"commands\":%d,\"rounds\":%d,\"syrah_submit_us\":%.4f,\"raw_submit_us\":%.4f,"
             "\"submit_difference_us\":%.4f,\"syrah_wall_us\":%.4f,\"raw_wall_us\":%.4f,\"ok\":%s}",
             spec_json, name_json, what, commands, n, sy->submit_us, raw->submit_us, diff, sy->wall_us, raw->wall_us,
             sy->ok && raw->ok ? "true" : "false");
}

/* Runs a kernel chain `rounds` times, Syrah and raw each round, Syrah
 * first in the even rounds and raw first in the odd ones (the side run
 * first can run at another speed); `sy` and `raw` receive the medians,
 * the result the median per-round difference. */
static double alternate(void (*syf)(const char *, result *), const char *spec, unsigned p, unsigned d, int svm,
                        result *sy, result *raw) {
  double ss[16], sw[16], rs[16], rw[16], df[16];
  int i, n = rounds < 16 ? rounds : 16, ok = 1;
  for (i = 0; i < n; ++i) {
    result a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (i % 2) raw_kernels(p, d, svm, &b);
    syf(spec, &a);
    if (i % 2 == 0) raw_kernels(p, d, svm, &b);
    ss[i] = a.submit_us;
    sw[i] = a.wall_us;
    rs[i] = b.submit_us;
    rw[i] = b.wall_us;
    df[i] = a.submit_us - b.submit_us;
    ok &= a.ok && b.ok;
  }
  sy->submit_us = median(ss, n);
  sy->wall_us = median(sw, n);
  raw->submit_us = median(rs, n);
  raw->wall_us = median(rw, n);
  sy->ok = raw->ok = ok;
  return median(df, n);
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  char name[256], strategy[64];
  const syrah_device *dev;
  result s_usm, r_usm, s_buf, r_buf, s_host, r_host;
  memset(&s_usm, 0, sizeof s_usm);
  memset(&r_usm, 0, sizeof r_usm);
  if (argc > 2) commands = atoi(argv[2]);
  if (argc > 3) rounds = atoi(argv[3]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || commands < 1 || rounds < 1 || rounds > 16) {
    fprintf(stderr, "usage: bench_chains P.D [commands] [rounds, 1 to 16]\n");
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, strategy, sizeof strategy, NULL));
  json_safe(name);
  spec_json = argv[1];
  name_json = name;
  printf("## Chains of %d commands, device %s (%s, USM %s)\n\n", commands, argv[1], name, strategy);
  printf("Medians over the rounds, Syrah and raw alternating; difference: median of the rounds' differences.\n\n");
  printf("| chain | Syrah submit µs | raw submit µs | difference µs | Syrah wall µs per command | raw wall µs per "
         "command | rounds | result |\n|---|---|---|---|---|---|---|---|\n");
  if (strcmp(strategy, "none") == 0) {
    printf("| usm | skipped: the device has no USM | | | | | | |\n");
  } else {
    double diff = alternate(sy_usm, argv[1], p, d, strcmp(strategy, "svm") == 0, &s_usm, &r_usm);
    row("in-order USM kernels", &s_usm, &r_usm, diff, rounds);
  }
  {
    double diff = alternate(sy_buffer, argv[1], p, d, 0, &s_buf, &r_buf);
    row("kernels through one buffer", &s_buf, &r_buf, diff, rounds);
  }
  sy_host(argv[1], &s_host);
  raw_host(p, d, &r_host);
  row("host tasks", &s_host, &r_host, s_host.submit_us - r_host.submit_us, 1);
  return !(s_buf.ok && r_buf.ok && s_host.ok && r_host.ok && (strcmp(strategy, "none") == 0 || (s_usm.ok && r_usm.ok)));
}
