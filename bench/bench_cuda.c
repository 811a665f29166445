/* Syrah on the CUDA back end against the CUDA driver API used by hand, on
 * one GPU in one process:
 *  - eager:  K tiny kernels on an in-order queue over one USM allocation,
 *            against K cuLaunchKernel calls on one stream;
 *  - graph:  a chain of C kernels recorded once as a Syrah graph and
 *            submitted R times, against the same chain built once by hand
 *            as a CUDA graph (kernel nodes, each after the previous) and
 *            launched R times. Each side's first launch of its graph is
 *            in the first round, which the medians leave aside.
 * Host microseconds per command submitted, and wall microseconds per
 * command until the last has finished; each kernel adds 1 to every
 * element, so the result is checked exactly. Rounds alternate Syrah and
 * raw, each first in every other round, and report medians. The raw side loads libcuda.so.1 itself and runs
 * a hand-written PTX kernel; it needs no CUDA headers.
 *
 * usage: bench_cuda P.D [K] [rounds] [C] [R]
 * (P.D: a device of the CUDA back end, whose ordinal is D) */
#include "bench_common.h"

static const char *source = "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n";

static const char *ptx = ".version 7.0\n"
                         ".target sm_50\n"
                         ".address_size 64\n"
                         ".visible .entry inc(.param .u64 p)\n"
                         "{\n"
                         "  .reg .b32 %r<6>;\n"
                         "  .reg .b64 %rd<5>;\n"
                         "  ld.param.u64 %rd1, [p];\n"
                         "  cvta.to.global.u64 %rd2, %rd1;\n"
                         "  mov.u32 %r1, %ctaid.x;\n"
                         "  mov.u32 %r2, %ntid.x;\n"
                         "  mov.u32 %r3, %tid.x;\n"
                         "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
                         "  mul.wide.s32 %rd3, %r4, 4;\n"
                         "  add.s64 %rd4, %rd2, %rd3;\n"
                         "  ld.global.u32 %r5, [%rd4];\n"
                         "  add.s32 %r5, %r5, 1;\n"
                         "  st.global.u32 [%rd4], %r5;\n"
                         "  ret;\n"
                         "}\n";

enum { ELEMS = 64, MAX_ROUNDS = 15 };

/* The few CUDA driver types and calls used, as the driver API defines them. */
typedef int cu_result;
typedef void *cu_handle;
typedef unsigned long long cu_ptr;
typedef struct {
  cu_handle func;
  unsigned grid[3], block[3], shared_mem;
  void **params, **extra;
  cu_handle kern, ctx;
} cu_kernel_node;

static struct {
  cu_result (*init)(unsigned);
  cu_result (*retain)(cu_handle *, int);
  cu_result (*set_current)(cu_handle);
  cu_result (*load)(cu_handle *, const void *);
  cu_result (*function)(cu_handle *, cu_handle, const char *);
  cu_result (*alloc)(cu_ptr *, size_t);
  cu_result (*free_)(cu_ptr);
  cu_result (*htod)(cu_ptr, const void *, size_t);
  cu_result (*dtoh)(void *, cu_ptr, size_t);
  cu_result (*stream)(cu_handle *, unsigned);
  cu_result (*sync)(cu_handle);
  cu_result (*launch)(cu_handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, cu_handle,
                      void **, void **);
  cu_result (*graph)(cu_handle *, unsigned);
  cu_result (*node)(cu_handle *, cu_handle, const cu_handle *, size_t, const cu_kernel_node *);
  cu_result (*instantiate)(cu_handle *, cu_handle, unsigned long long);
  cu_result (*graph_launch)(cu_handle, cu_handle);
  cu_result (*exec_destroy)(cu_handle);
  cu_result (*graph_destroy)(cu_handle);
} cu;

#define CU_OK(call)                                                             \
  do {                                                                          \
    cu_result rc_ = (call);                                                     \
    if (rc_ != 0) {                                                             \
      fprintf(stderr, "%s:%d: %s -> CUDA error %d\n", __FILE__, __LINE__, #call, rc_); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static int load_cuda(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void **slots[] = {(void **)&cu.init,       (void **)&cu.retain,       (void **)&cu.set_current,
                    (void **)&cu.load,       (void **)&cu.function,     (void **)&cu.alloc,
                    (void **)&cu.free_,      (void **)&cu.htod,         (void **)&cu.dtoh,
                    (void **)&cu.stream,     (void **)&cu.sync,         (void **)&cu.launch,
                    (void **)&cu.graph,      (void **)&cu.node,         (void **)&cu.instantiate,
                    (void **)&cu.graph_launch, (void **)&cu.exec_destroy, (void **)&cu.graph_destroy};
  const char *names[] = {"cuInit",          "cuDevicePrimaryCtxRetain",   "cuCtxSetCurrent",
                         "cuModuleLoadData", "cuModuleGetFunction",       "cuMemAlloc_v2",
                         "cuMemFree_v2",    "cuMemcpyHtoD_v2",            "cuMemcpyDtoH_v2",
                         "cuStreamCreate",  "cuStreamSynchronize",        "cuLaunchKernel",
                         "cuGraphCreate",   "cuGraphAddKernelNode_v2",    "cuGraphInstantiateWithFlags",
                         "cuGraphLaunch",   "cuGraphExecDestroy",         "cuGraphDestroy"};
  size_t i;
  if (!lib) return 0;
  for (i = 0; i < sizeof names / sizeof names[0]; ++i) {
    void *f = dlsym(lib, names[i]);
    if (!f) return 0;
    memcpy(slots[i], &f, sizeof f);
  }
  return cu.init(0) == 0;
}

typedef struct {
  double submit_us, wall_us;
  int ok;
} result;

static int commands = 10000, rounds = 5, chain = 1000, replays = 20;

typedef struct {
  cu_handle stream, fn;
  cu_ptr mem;
} raw_env_cuda;

static void raw_open_cuda(int ordinal, raw_env_cuda *e) {
  cu_handle ctx, mod;
  int zero[ELEMS] = {0};
  CU_OK(cu.retain(&ctx, ordinal));
  CU_OK(cu.set_current(ctx));
  CU_OK(cu.load(&mod, ptx));
  CU_OK(cu.function(&e->fn, mod, "inc"));
  CU_OK(cu.stream(&e->stream, 1));
  CU_OK(cu.alloc(&e->mem, sizeof zero));
  CU_OK(cu.htod(e->mem, zero, sizeof zero));
}

static int raw_check(raw_env_cuda *e, int expected) {
  int host[ELEMS];
  CU_OK(cu.dtoh(host, e->mem, sizeof host));
  return host[0] == expected && host[ELEMS - 1] == expected;
}

static void raw_eager(raw_env_cuda *e, result *r) {
  void *args[] = {&e->mem};
  double t0, t1;
  int zero[ELEMS] = {0}, i;
  CU_OK(cu.htod(e->mem, zero, sizeof zero));
  t0 = now_us();
  for (i = 0; i < commands; ++i) CU_OK(cu.launch(e->fn, 1, 1, 1, ELEMS, 1, 1, 0, e->stream, args, NULL));
  t1 = now_us();
  CU_OK(cu.sync(e->stream));
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  r->ok = raw_check(e, commands);
}

/* The chain as a CUDA graph, built and instantiated once (as Syrah's
 * graph is recorded once), its instantiation kept in `*x`. */
static void raw_graph_build(raw_env_cuda *e, cu_handle *g, cu_handle *x) {
  cu_handle prev = NULL, node;
  void *args[] = {&e->mem};
  cu_kernel_node p;
  int i;
  memset(&p, 0, sizeof p);
  p.func = e->fn;
  p.grid[0] = p.grid[1] = p.grid[2] = 1;
  p.block[0] = ELEMS;
  p.block[1] = p.block[2] = 1;
  p.params = args;
  CU_OK(cu.graph(g, 0));
  for (i = 0; i < chain; ++i) {
    CU_OK(cu.node(&node, *g, prev ? &prev : NULL, prev ? 1 : 0, &p));
    prev = node;
  }
  CU_OK(cu.instantiate(x, *g, 0));
}

static void raw_graph(raw_env_cuda *e, cu_handle x, result *r) {
  double t0, t1;
  int zero[ELEMS] = {0}, i;
  CU_OK(cu.htod(e->mem, zero, sizeof zero));
  t0 = now_us();
  for (i = 0; i < replays; ++i) CU_OK(cu.graph_launch(x, e->stream));
  t1 = now_us();
  CU_OK(cu.sync(e->stream));
  r->wall_us = (now_us() - t0) / ((double)replays * chain);
  r->submit_us = (t1 - t0) / ((double)replays * chain);
  r->ok = raw_check(e, replays * chain);
}

typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  syrah_kernel *k;
  int *mem;
} sy_env;

static void sy_reset(sy_env *e) {
  int zero[ELEMS] = {0};
  SY_OK(syrah_queue_memcpy(e->q, e->mem, zero, sizeof zero, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(e->q));
}

static int sy_check(sy_env *e, int expected) {
  int host[ELEMS];
  SY_OK(syrah_queue_memcpy(e->q, host, e->mem, sizeof host, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(e->q));
  return host[0] == expected && host[ELEMS - 1] == expected;
}

static void sy_launches(sy_env *e, int n) {
  syrah_range r = {1, {ELEMS, 1, 1}, {ELEMS, 1, 1}, {0, 0, 0}};
  syrah_kernel_arg a = syrah_arg_usm(e->mem);
  int i;
  for (i = 0; i < n; ++i) SY_OK(syrah_queue_launch(e->q, e->k, &r, &a, 1, NULL, 0, NULL));
}

static void sy_eager(sy_env *e, result *r) {
  double t0, t1;
  sy_reset(e);
  t0 = now_us();
  sy_launches(e, commands);
  t1 = now_us();
  SY_OK(syrah_queue_wait(e->q));
  r->wall_us = (now_us() - t0) / commands;
  r->submit_us = (t1 - t0) / commands;
  r->ok = sy_check(e, commands);
}

static void sy_graph(sy_env *e, syrah_graph_exec *x, result *r) {
  double t0, t1;
  int i;
  sy_reset(e);
  t0 = now_us();
  for (i = 0; i < replays; ++i) SY_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
  t1 = now_us();
  SY_OK(syrah_queue_wait(e->q));
  r->wall_us = (now_us() - t0) / ((double)replays * chain);
  r->submit_us = (t1 - t0) / ((double)replays * chain);
  r->ok = sy_check(e, replays * chain);
}

static void row(const char *what, const char *unit, result *s, result *r, int n) {
  double ss[MAX_ROUNDS] = {0}, rs[MAX_ROUNDS] = {0}, sw[MAX_ROUNDS] = {0}, rw[MAX_ROUNDS] = {0};
  int i, ok = 1;
  for (i = 0; i < n; ++i) {
    ss[i] = s[i].submit_us;
    rs[i] = r[i].submit_us;
    sw[i] = s[i].wall_us;
    rw[i] = r[i].wall_us;
    ok &= s[i].ok && r[i].ok;
  }
  printf("| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", what, unit, median(ss, n), median(rs, n),
         median_ratio(ss, rs, n), median(sw, n), median(rw, n), ok ? "ok" : "WRONG");
}

int main(int argc, char **argv) {
  unsigned p, d;
  const syrah_device *dev;
  syrah_program *prog;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_graph_backend backend = 0;
  uint64_t which = 0;
  sy_env e;
  raw_env_cuda raw;
  cu_handle rg_graph = NULL, rg_exec = NULL;
  result se[MAX_ROUNDS], re[MAX_ROUNDS], sg[MAX_ROUNDS], rg[MAX_ROUNDS];
  int i;
  if (argc > 2) commands = atoi(argv[2]);
  if (argc > 3) rounds = atoi(argv[3]);
  if (argc > 4) chain = atoi(argv[4]);
  if (argc > 5) replays = atoi(argv[5]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || commands < 1 || rounds < 1 || rounds > MAX_ROUNDS ||
      chain < 1 || replays < 1) {
    fprintf(stderr, "usage: bench_cuda P.D [K] [rounds, 1 to %d] [C] [R]\n", MAX_ROUNDS);
    return 2;
  }
  if (!load_cuda()) {
    printf("skipped: libcuda.so.1 could not be loaded and initialised\n");
    return 0;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_u64(dev, SYRAH_DEVICE_INFO_BACKEND, &which));
  if (which != SYRAH_BACKEND_CUDA) {
    fprintf(stderr, "device %s is not on the CUDA back end (name a device of the \"CUDA driver\" platform; see syrah-info)\n", argv[1]);
    return 2;
  }
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e.q));
  SY_OK(syrah_queue_get_context(e.q, &e.ctx));
  SY_OK(syrah_program_create_from_source(e.ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "inc", &e.k));
  SY_OK(syrah_malloc_device(e.ctx, dev, ELEMS * sizeof(int), (void **)&e.mem));
  raw_open_cuda((int)d, &raw);
  raw_graph_build(&raw, &rg_graph, &rg_exec);
  SY_OK(syrah_queue_begin_recording(e.q));
  sy_launches(&e, chain);
  SY_OK(syrah_queue_end_recording(e.q, &g));
  SY_OK(syrah_graph_finalize(g, &x));
  /* Syrah first in the even rounds, raw in the odd ones: the side run
   * first can run at another speed. */
  for (i = 0; i < rounds; ++i) {
    if (i % 2) raw_eager(&raw, &re[i]);
    sy_eager(&e, &se[i]);
    if (i % 2 == 0) raw_eager(&raw, &re[i]);
    if (i % 2) raw_graph(&raw, rg_exec, &rg[i]);
    sy_graph(&e, x, &sg[i]);
    if (i % 2 == 0) raw_graph(&raw, rg_exec, &rg[i]);
  }
  SY_OK(syrah_graph_exec_get_backend(x, &backend));
  printf("## Syrah on CUDA against the CUDA driver API, device %s, median of %d rounds\n\n", argv[1], rounds);
  printf("| path | per | Syrah submit µs | raw submit µs | ratio | Syrah wall µs | raw wall µs | result |\n");
  printf("|---|---|---|---|---|---|---|---|\n");
  row("eager launches, USM", "kernel", se, re, rounds);
  row(backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "graph chain (CUDA graph)" : "graph chain (replayed node by node)",
      "kernel", sg, rg, rounds);
  printf("\n%d eager launches; a chain of %d kernels replayed %d times per round.\n", commands, chain, replays);
  CU_OK(cu.exec_destroy(rg_exec));
  CU_OK(cu.graph_destroy(rg_graph));
  SY_OK(syrah_graph_exec_release(x));
  SY_OK(syrah_graph_release(g));
  SY_OK(syrah_free(e.ctx, e.mem));
  SY_OK(syrah_kernel_release(e.k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_queue_release(e.q));
  SY_OK(syrah_context_release(e.ctx));
  return 0;
}
