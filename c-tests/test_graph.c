/* Command graphs: a chain, a diamond, host tasks and buffers inside a
 * graph, submissions that find their buffers unchanged, argument updates
 * between replays, a two-device stencil over
 * shared buffers, and the refusals; every replayed result is compared with
 * the same commands run eagerly. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <pthread.h>

static const char *kSource =
    "__kernel void addv(__global int *p, int v) { p[get_global_id(0)] += v; }\n"
    "__kernel void mulv(__global int *p, int v) { p[get_global_id(0)] *= v; }\n"
    "__kernel void iota(__global int *p) { p[get_global_id(0)] = (int)get_global_id(0); }\n"
    "__kernel void lin(__global const int *s, __global int *d, int a, int b)\n"
    "{ size_t i = get_global_id(0); d[i] = s[i] * a + b; }\n"
    "__kernel void sum2(__global const int *x, __global const int *y, __global int *d)\n"
    "{ size_t i = get_global_id(0); d[i] = x[i] + y[i]; }\n"
    "__kernel void stencil(__global const int *s, __global int *d, int w, int h, int row0, int lo)\n"
    "{ int x = (int)get_global_id(0), y = row0 + (int)get_global_id(1);\n"
    "  int c = s[(y - lo) * w + x];\n"
    "  int up = y > 0 ? s[(y - 1 - lo) * w + x] : 0, dn = y < h - 1 ? s[(y + 1 - lo) * w + x] : 0;\n"
    "  int lf = x > 0 ? s[(y - lo) * w + x - 1] : 0, rt = x < w - 1 ? s[(y - lo) * w + x + 1] : 0;\n"
    "  d[(y - row0) * w + x] = (c * 3 + up + dn + lf + rt) % 100003; }\n";

enum { N = 1024, CHAIN = 40, REPLAYS = 5 };

static syrah_kernel *kernel(syrah_program *p, const char *name) {
  syrah_kernel *k = NULL;
  if (syrah_kernel_create(p, name, &k) != SYRAH_SUCCESS)
    T_FAIL("kernel %s: %s", name, syrah_last_error_message());
  return k;
}

static syrah_kernel_arg acc_arg(size_t i) {
  syrah_kernel_arg a;
  a.kind = SYRAH_ARG_ACCESSOR;
  a.size = i;
  a.value = NULL;
  return a;
}

/* The chain: CHAIN - 1 kernels adding 1..CHAIN-1 then one multiplying by 3 on
 * `data`, recorded once from an in-order queue and replayed; compared with
 * the same launches run eagerly. */
static void test_chain(const syrah_device *dev, syrah_queue *q, syrah_program *prog) {
  syrah_context *ctx = NULL;
  syrah_kernel *add = kernel(prog, "addv"), *mul = kernel(prog, "mulv");
  int *eager = NULL, *replay = NULL, host[N], expect[N];
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_range r = syrah_range_1d(N);
  size_t i, nodes = 0;
  int v, j, wrong = 0, three = 3;
  syrah_graph_backend b = 0, db = 0;
  if (!add || !mul) return;
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&eager));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&replay));
  for (i = 0; i < N; ++i) host[i] = (int)i;
  EXPECT_OK(syrah_queue_memcpy(q, eager, host, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, replay, host, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  /* Eager: REPLAYS rounds of the chain. */
  for (j = 0; j < REPLAYS; ++j)
    for (v = 1; v <= CHAIN; ++v) {
      syrah_kernel_arg a[2];
      a[0] = syrah_arg_usm(eager);
      a[1] = syrah_arg_value(v == CHAIN ? &three : &v, sizeof v);
      EXPECT_OK(syrah_queue_launch(q, v == CHAIN ? mul : add, &r, a, 2, NULL, 0, NULL));
    }
  EXPECT_OK(syrah_queue_begin_recording(q));
  for (v = 1; v <= CHAIN; ++v) {
    syrah_kernel_arg a[2];
    a[0] = syrah_arg_usm(replay);
    a[1] = syrah_arg_value(v == CHAIN ? &three : &v, sizeof v);
    EXPECT_OK(syrah_queue_launch(q, v == CHAIN ? mul : add, &r, a, 2, NULL, 0, NULL));
  }
  REQUIRE_OK(syrah_queue_end_recording(q, &g));
  EXPECT_OK(syrah_graph_get_node_count(g, &nodes));
  EXPECT_EQ(nodes, CHAIN);
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  EXPECT_OK(syrah_graph_exec_get_backend(x, &b));
  EXPECT_OK(syrah_device_get_graph_backend(dev, &db));
  EXPECT_EQ(b, db);
  printf("chain of %d kernels: %s back end\n", CHAIN,
         b == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "command-buffer" : "replay");
  for (j = 0; j < REPLAYS; ++j) EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, expect, eager, sizeof expect, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, replay, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0; i < N; ++i) {
    int e = (int)i;
    for (j = 0; j < REPLAYS; ++j) e = (e + CHAIN * (CHAIN - 1) / 2) * 3;
    wrong += host[i] != expect[i] || expect[i] != e;
  }
  EXPECT_EQ(wrong, 0);

  /* Argument updates: node 0 adds 1000 instead of 1, and the last node
   * works on `eager` instead of `replay`. */
  {
    int thousand = 1000, *h2 = host;
    syrah_kernel_arg a = syrah_arg_value(&thousand, sizeof thousand);
    syrah_kernel_arg p = syrah_arg_usm(eager);
    for (i = 0; i < N; ++i) h2[i] = 1;
    EXPECT_OK(syrah_queue_memcpy(q, replay, h2, sizeof host, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(q, eager, h2, sizeof host, NULL, 0, NULL));
    EXPECT_OK(syrah_graph_exec_set_arg(x, 0, 1, &a));
    EXPECT_OK(syrah_graph_exec_set_arg(x, CHAIN - 1, 0, &p));
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(q, expect, eager, sizeof expect, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(q, host, replay, sizeof host, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    /* replay: 1 + 1000 + 2 + ... + (CHAIN-1), never multiplied; eager: 3. */
    EXPECT_EQ(host[7], 1 + 1000 + CHAIN * (CHAIN - 1) / 2 - 1);
    EXPECT_EQ(expect[7], 3);
    EXPECT_ERR(syrah_graph_exec_set_arg(x, CHAIN, 0, &p), SYRAH_ERROR_INVALID_ARGUMENT,
               "node 40 is out of range: the graph has 40 nodes");
    EXPECT_ERR(syrah_graph_exec_set_arg(x, 0, 2, &p), SYRAH_ERROR_KERNEL_ARGUMENTS,
               "argument index 2 is out of range");
    a = acc_arg(0);
    EXPECT_ERR(syrah_graph_exec_set_arg(x, 0, 0, &a), SYRAH_ERROR_KERNEL_ARGUMENTS,
               "argument 0 of node 0 (kernel 'addv') is not an accessor");
  }
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  x = NULL;
  g = NULL;

  /* Ten identical launches (which may share one kernel object): updating
   * one of them changes that one only. */
  {
    int one = 1, hundred = 100;
    syrah_kernel_arg a[2], upd = syrah_arg_value(&hundred, sizeof hundred);
    a[0] = syrah_arg_usm(replay);
    a[1] = syrah_arg_value(&one, sizeof one);
    EXPECT_OK(syrah_queue_memset(q, replay, 0, N * sizeof(int), NULL, 0, NULL));
    EXPECT_OK(syrah_queue_begin_recording(q));
    for (j = 0; j < 10; ++j) EXPECT_OK(syrah_queue_launch(q, add, &r, a, 2, NULL, 0, NULL));
    REQUIRE_OK(syrah_queue_end_recording(q, &g));
    REQUIRE_OK(syrah_graph_finalize(g, &x));
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_graph_exec_set_arg(x, 3, 1, &upd));
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(q, host, replay, sizeof host, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_EQ(host[0], 10 + 9 + 100);
    EXPECT_EQ(host[N - 1], 10 + 9 + 100);
    EXPECT_OK(syrah_graph_exec_release(x));
    EXPECT_OK(syrah_graph_release(g));
  }
  EXPECT_OK(syrah_free(ctx, eager));
  EXPECT_OK(syrah_free(ctx, replay));
  syrah_kernel_release(add);
  syrah_kernel_release(mul);
  syrah_context_release(ctx);
}

/* A diamond on an out-of-order queue: iota -> (lin *2+0, lin *1+3) -> sum2,
 * its edges given by the recorded events. */
static void test_diamond(const syrah_device *dev, syrah_queue *q, syrah_program *prog) {
  syrah_context *ctx = NULL;
  syrah_kernel *iota = kernel(prog, "iota"), *lin = kernel(prog, "lin"), *sum = kernel(prog, "sum2");
  int *p = NULL, *a = NULL, *b = NULL, *d = NULL, host[N];
  syrah_event *e0 = NULL, *e1 = NULL, *e2 = NULL, *deps[2], *done = NULL;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_range r = syrah_range_1d(N);
  int two = 2, zero = 0, one = 1, three = 3, wrong = 0, round;
  size_t i;
  syrah_kernel_arg args[4];
  if (!iota || !lin || !sum) return;
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&p));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&a));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&b));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&d));
  EXPECT_OK(syrah_queue_begin_recording(q));
  args[0] = syrah_arg_usm(p);
  EXPECT_OK(syrah_queue_launch(q, iota, &r, args, 1, NULL, 0, &e0));
  args[1] = syrah_arg_usm(a);
  args[2] = syrah_arg_value(&two, sizeof two);
  args[3] = syrah_arg_value(&zero, sizeof zero);
  EXPECT_OK(syrah_queue_launch(q, lin, &r, args, 4, (const syrah_event *const *)&e0, 1, &e1));
  args[1] = syrah_arg_usm(b);
  args[2] = syrah_arg_value(&one, sizeof one);
  args[3] = syrah_arg_value(&three, sizeof three);
  EXPECT_OK(syrah_queue_launch(q, lin, &r, args, 4, (const syrah_event *const *)&e0, 1, &e2));
  /* A recorded command's event names the node; it never runs. */
  EXPECT_ERR(syrah_event_wait(e1), SYRAH_ERROR_INVALID_OPERATION, "a recorded command does not run");
  deps[0] = e1;
  deps[1] = e2;
  args[0] = syrah_arg_usm(a);
  args[1] = syrah_arg_usm(b);
  args[2] = syrah_arg_usm(d);
  EXPECT_OK(syrah_queue_launch(q, sum, &r, args, 3, (const syrah_event *const *)deps, 2, NULL));
  REQUIRE_OK(syrah_queue_end_recording(q, &g));
  /* A recorded event cannot be a dependency of a command that runs. */
  EXPECT_ERR(syrah_queue_barrier(q, (const syrah_event *const *)&e1, 1, NULL),
             SYRAH_ERROR_INVALID_OPERATION, "dependencies[0]");
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  for (round = 0; round < 3; ++round) {
    EXPECT_OK(syrah_queue_memset(q, d, 0, N * sizeof(int), NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, &done));
    EXPECT_OK(syrah_event_wait(done));
    syrah_event_release(done);
    done = NULL;
    EXPECT_OK(syrah_queue_memcpy(q, host, d, sizeof host, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    for (i = 0; i < N; ++i) wrong += host[i] != 3 * (int)i + 3;
  }
  EXPECT_EQ(wrong, 0);
  syrah_event_release(e0);
  syrah_event_release(e1);
  syrah_event_release(e2);
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  syrah_free(ctx, p);
  syrah_free(ctx, a);
  syrah_free(ctx, b);
  syrah_free(ctx, d);
  syrah_kernel_release(iota);
  syrah_kernel_release(lin);
  syrah_kernel_release(sum);
  syrah_context_release(ctx);
}

typedef struct {
  int runs;
  int released;
  int factor;
} task_state;

static syrah_status task_scale(const syrah_host_task_context *c, void *user) {
  task_state *s = (task_state *)user;
  int *p = NULL;
  size_t i;
  syrah_status st = syrah_host_task_get_pointer(c, 0, (void **)&p);
  if (st != SYRAH_SUCCESS) return st;
  for (i = 0; i < N; ++i) p[i] *= s->factor;
  ++s->runs;
  return SYRAH_SUCCESS;
}

static void task_release(void *user) { ++((task_state *)user)->released; }

/* Buffers and a host task in a graph: kernel adds 5, host task doubles,
 * kernel adds 1; three replays equal three eager rounds, and the host
 * reads the result through a host accessor between replays (the pages go
 * home and come back). Also the refusals while recording. */
static void test_buffers_and_host_tasks(syrah_queue *q, syrah_program *prog) {
  syrah_kernel *add = kernel(prog, "addv");
  int data[N], eager[N], five = 5, one = 1, round, wrong = 0;
  size_t i;
  syrah_buffer *buf = NULL, *other = NULL;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_host_accessor *ha = NULL;
  task_state ts = {0, 0, 2};
  syrah_host_task task;
  syrah_accessor acc;
  syrah_buffer_desc desc = t_desc1(N, data, SYRAH_HOST_WRITE_BACK);
  syrah_context *ctx = NULL;
  int *hp = NULL;
  if (!add) return;
  for (i = 0; i < N; ++i) data[i] = eager[i] = (int)i;
  for (round = 0; round < 3; ++round)
    for (i = 0; i < N; ++i) eager[i] = ((eager[i] + 5) * 2) + 1;
  REQUIRE_OK(syrah_buffer_create(&desc, &buf));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  {
    syrah_buffer_desc d2 = t_desc1(N, NULL, SYRAH_HOST_NONE);
    REQUIRE_OK(syrah_buffer_create(&d2, &other));
  }
  task.run = task_scale;
  task.user_data = &ts;
  task.release = task_release;
  acc = t_whole(buf, SYRAH_ACCESS_READ_WRITE);
  EXPECT_OK(syrah_queue_begin_recording(q));
  EXPECT_ERR(syrah_queue_begin_recording(q), SYRAH_ERROR_INVALID_ARGUMENT, "already recording");
  EXPECT_OK(t_launch_rw(q, add, buf, N, five, NULL));
  EXPECT_OK(syrah_queue_submit_host_tasks(q, &acc, 1, &task, 1, NULL, 0, NULL));
  EXPECT_OK(t_launch_rw(q, add, buf, N, one, NULL));
  /* What a graph cannot hold fails at the call. */
  EXPECT_ERR(syrah_queue_wait(q), SYRAH_ERROR_INVALID_OPERATION, "waiting for the queue cannot be recorded");
  EXPECT_ERR(syrah_buffer_host_access(buf, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&hp),
             SYRAH_ERROR_INVALID_OPERATION, "being recorded");
  /* A buffer no node uses can still be read. */
  EXPECT_OK(syrah_buffer_host_access(other, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&hp));
  if (ha) EXPECT_OK(syrah_host_accessor_release(ha));
  ha = NULL;
  EXPECT_ERR(syrah_queue_fill_accessor(q, &acc, &five, sizeof five, NULL, 0, NULL), SYRAH_ERROR_INVALID_OPERATION,
             "an explicit accessor copy or fill cannot be recorded");
  {
    syrah_event *outside = NULL;
    EXPECT_OK(syrah_user_event_create(ctx, &outside));
    if (outside) {
      EXPECT_ERR(syrah_queue_barrier(q, (const syrah_event *const *)&outside, 1, NULL),
                 SYRAH_ERROR_INVALID_ARGUMENT, "runs outside graph");
      EXPECT_OK(syrah_user_event_complete(outside, false));
      syrah_event_release(outside);
    }
  }
  REQUIRE_OK(syrah_queue_end_recording(q, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  for (round = 0; round < 3; ++round) {
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    /* A host accessor between replays: the pages come home, then go back
     * to the device for the next replay. */
    EXPECT_OK(syrah_buffer_host_access(buf, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&hp));
    if (ha) {
      if (hp && round == 0) EXPECT_EQ(hp[10], ((10 + 5) * 2) + 1);
      EXPECT_OK(syrah_host_accessor_release(ha));
      ha = NULL;
    }
  }
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(ts.runs, 3);
  EXPECT_OK(syrah_buffer_release(buf));
  for (i = 0; i < N; ++i) wrong += data[i] != eager[i];
  EXPECT_EQ(wrong, 0);
  /* Its buffer released, the graph cannot be replayed. */
  EXPECT_ERR(syrah_queue_submit_graph(q, x, NULL, 0, NULL), SYRAH_ERROR_INVALID_OPERATION,
             "accesses a buffer that was released");
  EXPECT_EQ(ts.released, 0);
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_EQ(ts.released, 1);
  syrah_buffer_release(other);
  syrah_kernel_release(add);
  syrah_context_release(ctx);
}

/* Rows of 512 bytes: a row offset is a valid sub-buffer origin on every
 * driver seen (the H100 needs multiples of 512 bytes) when buffers run on
 * plain cl_mem. */
enum { W = 128, H = 48, STEPS = 6 };

/* One stencil step of rows [row0, row0 + rows) from `src` into `dst`, as a
 * command group with accessors (the rows read include a halo row each
 * side). */
static syrah_status stencil_step(syrah_queue *q, syrah_kernel *k, syrah_buffer *src, syrah_buffer *dst,
                                 int row0, int rows) {
  syrah_accessor acc[2];
  syrah_kernel_arg args[6];
  syrah_range r = syrah_range_2d(W, (size_t)rows);
  int w = W, h = H, lo = row0 > 0 ? row0 - 1 : 0, hi = row0 + rows < H ? row0 + rows + 1 : H;
  memset(acc, 0, sizeof acc);
  acc[0].buffer = src;
  acc[0].mode = SYRAH_ACCESS_READ;
  acc[0].offset[0] = (size_t)lo;
  acc[0].range[0] = (size_t)(hi - lo);
  acc[0].range[1] = W;
  acc[1].buffer = dst;
  acc[1].mode = SYRAH_ACCESS_WRITE;
  acc[1].offset[0] = (size_t)row0;
  acc[1].range[0] = (size_t)rows;
  acc[1].range[1] = W;
  args[0] = acc_arg(0);
  args[1] = acc_arg(1);
  args[2] = syrah_arg_value(&w, sizeof w);
  args[3] = syrah_arg_value(&h, sizeof h);
  args[4] = syrah_arg_value(&row0, sizeof row0);
  args[5] = syrah_arg_value(&lo, sizeof lo);
  return syrah_queue_submit_kernel(q, k, &r, acc, 2, args, 6, NULL, 0, NULL);
}

static void stencil_host(const int *s, int *d) {
  int x, y;
  for (y = 0; y < H; ++y)
    for (x = 0; x < W; ++x) {
      int c = s[y * W + x], up = y > 0 ? s[(y - 1) * W + x] : 0, dn = y < H - 1 ? s[(y + 1) * W + x] : 0;
      int lf = x > 0 ? s[y * W + x - 1] : 0, rt = x < W - 1 ? s[y * W + x + 1] : 0;
      d[y * W + x] = (c * 3 + up + dn + lf + rt) % 100003;
    }
}

static syrah_buffer *grid(int *host) {
  syrah_buffer_desc d;
  syrah_buffer *b = NULL;
  memset(&d, 0, sizeof d);
  d.element_size = 4;
  d.dimensions = 2;
  d.range[0] = H;
  d.range[1] = W;
  d.page_size[0] = 4;
  d.page_size[1] = W;
  d.host_pointer = host;
  d.ownership = SYRAH_HOST_WRITE_BACK;
  if (syrah_buffer_create(&d, &b) != SYRAH_SUCCESS) T_FAIL("grid: %s", syrah_last_error_message());
  return b;
}

/* A stencil over two buffers split between the two devices of one
 * context: each device's half of a step (a ping and a pong) is recorded
 * as a graph on that device's queue; replaying the four graphs STEPS
 * times moves the halo pages between the devices at every replay and
 * equals the host's result exactly. */
static void test_two_device_stencil(void) {
  size_t n = 0, i, j;
  const syrah_device *list[64];
  const syrah_device *pair[2] = {NULL, NULL};
  syrah_context *ctx[2] = {NULL, NULL};
  syrah_queue *q[2] = {NULL, NULL};
  syrah_program *prog[2] = {NULL, NULL};
  syrah_kernel *kk[2] = {NULL, NULL};
  syrah_graph *g[2][2];
  syrah_graph_exec *x[2][2];
  static int a[H * W], b[H * W], ha[H * W], hb[H * W], ea[H * W], eb[H * W];
  syrah_buffer *ba, *bb, *xa, *xb;
  syrah_buffer_stats gs[2], es[2];
  int step, d, wrong = 0, shared = 1;
  t_device = "two devices";
  if (syrah_get_devices(list, 64, &n) != SYRAH_SUCCESS) return;
  for (i = 0; i < n && !pair[1]; ++i)
    for (j = i + 1; j < n && !pair[1]; ++j) {
      uint64_t pi = 0, pj = 0;
      syrah_device_get_info_u64(list[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi);
      syrah_device_get_info_u64(list[j], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pj);
      if (pi == pj) {
        pair[0] = list[i];
        pair[1] = list[j];
      }
    }
  if (!pair[1] && n >= 2) {
    /* Two platforms: a context each, the pages passing through the host. */
    pair[0] = list[0];
    pair[1] = list[1];
    shared = 0;
  }
  if (!pair[1]) {
    t_skip("two-device stencil graphs", "there is only one device");
    return;
  }
  printf("== two devices of %s\n", shared ? "one platform, one context" : "two platforms, a context each");
  if (shared) {
    REQUIRE_OK(syrah_context_create(pair, 2, &ctx[0]));
    REQUIRE_OK(syrah_context_retain(ctx[0]));
    ctx[1] = ctx[0];
  } else {
    for (d = 0; d < 2; ++d) REQUIRE_OK(syrah_context_create(&pair[d], 1, &ctx[d]));
  }
  for (d = 0; d < 2; ++d) {
    REQUIRE_OK(syrah_queue_create(ctx[d], pair[d], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q[d]));
    REQUIRE_OK(syrah_program_create_from_source(ctx[d], kSource, NULL, &prog[d]));
    REQUIRE_OK(syrah_kernel_create(prog[d], "stencil", &kk[d]));
  }
  for (i = 0; i < H * W; ++i) a[i] = ha[i] = ea[i] = (int)((i * 7919) % 1000);
  /* The same steps run eagerly on their own buffers: the graphs must move
   * exactly the bytes, in exactly the copies, that these do. */
  xa = grid(ea);
  xb = grid(eb);
  if (!xa || !xb) return;
  for (step = 0; step < STEPS; ++step)
    for (d = 0; d < 2; ++d)
      EXPECT_OK(stencil_step(q[d], kk[d], step % 2 ? xb : xa, step % 2 ? xa : xb, d * H / 2, H / 2));
  for (d = 0; d < 2; ++d) EXPECT_OK(syrah_queue_wait(q[d]));
  EXPECT_OK(syrah_buffer_get_stats(xa, &es[0]));
  EXPECT_OK(syrah_buffer_get_stats(xb, &es[1]));
  EXPECT_OK(syrah_buffer_release(xa));
  EXPECT_OK(syrah_buffer_release(xb));
  ba = grid(a);
  bb = grid(b);
  if (!ba || !bb) return;
  for (d = 0; d < 2; ++d)
    for (step = 0; step < 2; ++step) {
      EXPECT_OK(syrah_queue_begin_recording(q[d]));
      EXPECT_OK(stencil_step(q[d], kk[d], step ? bb : ba, step ? ba : bb, d * H / 2, H / 2));
      EXPECT_OK(syrah_queue_end_recording(q[d], &g[d][step]));
      EXPECT_OK(syrah_graph_finalize(g[d][step], &x[d][step]));
    }
  for (step = 0; step < STEPS; ++step) {
    for (d = 0; d < 2; ++d) EXPECT_OK(syrah_queue_submit_graph(q[d], x[d][step % 2], NULL, 0, NULL));
    stencil_host(step % 2 ? hb : ha, step % 2 ? ha : hb);
  }
  /* A graph replayed on a queue of another device is refused, naming both. */
  EXPECT_ERR(syrah_queue_submit_graph(q[1], x[0][0], NULL, 0, NULL), SYRAH_ERROR_WRONG_CONTEXT,
             "was recorded for device");
  for (d = 0; d < 2; ++d) EXPECT_OK(syrah_queue_wait(q[d]));
  EXPECT_OK(syrah_buffer_get_stats(ba, &gs[0]));
  EXPECT_OK(syrah_buffer_get_stats(bb, &gs[1]));
  for (d = 0; d < 2; ++d) {
    EXPECT_EQ(gs[d].host_to_device_bytes, es[d].host_to_device_bytes);
    EXPECT_EQ(gs[d].device_to_device_bytes, es[d].device_to_device_bytes);
    EXPECT_EQ(gs[d].device_to_host_bytes, es[d].device_to_host_bytes);
    EXPECT_EQ(gs[d].host_to_device_copies, es[d].host_to_device_copies);
    EXPECT_EQ(gs[d].device_to_device_copies, es[d].device_to_device_copies);
    EXPECT_EQ(gs[d].device_to_host_copies, es[d].device_to_host_copies);
  }
  /* Halo pages moved between the devices at every step. */
  EXPECT_TRUE(gs[0].device_to_device_bytes + gs[1].device_to_device_bytes + gs[0].device_to_host_bytes +
                  gs[1].device_to_host_bytes >
              0);
  printf("two-device stencil: %llu + %llu bytes between the devices and the host, as eager runs move\n",
         (unsigned long long)(gs[0].device_to_device_bytes + gs[1].device_to_device_bytes),
         (unsigned long long)(gs[0].host_to_device_bytes + gs[1].host_to_device_bytes + gs[0].device_to_host_bytes +
                              gs[1].device_to_host_bytes));
  for (d = 0; d < 2; ++d)
    for (step = 0; step < 2; ++step) {
      syrah_graph_exec_release(x[d][step]);
      syrah_graph_release(g[d][step]);
    }
  EXPECT_OK(syrah_buffer_release(ba));
  EXPECT_OK(syrah_buffer_release(bb));
  for (i = 0; i < H * W; ++i) wrong += a[i] != ha[i] || b[i] != hb[i] || ea[i] != ha[i] || eb[i] != hb[i];
  EXPECT_EQ(wrong, 0);
  for (d = 0; d < 2; ++d) {
    syrah_kernel_release(kk[d]);
    syrah_program_release(prog[d]);
    syrah_queue_release(q[d]);
    syrah_context_release(ctx[d]);
  }
  t_device = "";
}

/* The host rewrites a buffer between two submissions of a graph that
 * reads and writes it: the second submission sees the host's data (its
 * pages are brought back to the device), and the buffer moves exactly the
 * bytes, in exactly the copies, of the same commands run eagerly. */
static void test_pages_moved_between_replays(syrah_queue *q, syrah_program *prog) {
  syrah_kernel *add = kernel(prog, "addv");
  static int data[2][N];
  syrah_buffer_stats st[2];
  int run, i, wrong = 0;
  if (!add) return;
  for (run = 0; run < 2; ++run) {
    syrah_buffer_desc desc = t_desc1(N, data[run], SYRAH_HOST_WRITE_BACK);
    syrah_buffer *buf = NULL;
    syrah_graph *g = NULL;
    syrah_graph_exec *x = NULL;
    syrah_host_accessor *ha = NULL;
    int *hp = NULL;
    for (i = 0; i < N; ++i) data[run][i] = i;
    REQUIRE_OK(syrah_buffer_create(&desc, &buf));
    if (run == 1) {
      EXPECT_OK(syrah_queue_begin_recording(q));
      EXPECT_OK(t_launch_rw(q, add, buf, N, 1, NULL));
      REQUIRE_OK(syrah_queue_end_recording(q, &g));
      REQUIRE_OK(syrah_graph_finalize(g, &x));
    }
    EXPECT_OK(run ? syrah_queue_submit_graph(q, x, NULL, 0, NULL) : t_launch_rw(q, add, buf, N, 1, NULL));
    EXPECT_OK(syrah_buffer_host_access(buf, SYRAH_ACCESS_READ_WRITE, NULL, NULL, &ha, (void **)&hp));
    if (hp) {
      EXPECT_EQ(hp[5], 6);
      for (i = 0; i < N; ++i) hp[i] = 1000 + i;
    }
    if (ha) EXPECT_OK(syrah_host_accessor_release(ha));
    EXPECT_OK(run ? syrah_queue_submit_graph(q, x, NULL, 0, NULL) : t_launch_rw(q, add, buf, N, 1, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_buffer_get_stats(buf, &st[run]));
    EXPECT_OK(syrah_buffer_release(buf));
    if (x) EXPECT_OK(syrah_graph_exec_release(x));
    if (g) EXPECT_OK(syrah_graph_release(g));
    for (i = 0; i < N; ++i) wrong += data[run][i] != 1001 + i;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(st[1].host_to_device_bytes, st[0].host_to_device_bytes);
  EXPECT_EQ(st[1].device_to_host_bytes, st[0].device_to_host_bytes);
  EXPECT_EQ(st[1].host_to_device_copies, st[0].host_to_device_copies);
  EXPECT_EQ(st[1].device_to_host_copies, st[0].device_to_host_copies);
  syrah_kernel_release(add);
}

/* One step of the unchanged-buffers case: a + 1, b = a * 2 + 5, a + 3. */
static syrah_status step_three(syrah_queue *q, syrah_kernel *add, syrah_kernel *lin, syrah_buffer *a,
                               syrah_buffer *b) {
  syrah_accessor acc[2];
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[4];
  int two = 2, five = 5;
  syrah_status st = t_launch_rw(q, add, a, N, 1, NULL);
  if (st != SYRAH_SUCCESS) return st;
  acc[0] = t_whole(a, SYRAH_ACCESS_READ);
  acc[1] = t_whole(b, SYRAH_ACCESS_DISCARD_WRITE);
  args[0] = acc_arg(0);
  args[1] = acc_arg(1);
  args[2] = syrah_arg_value(&two, sizeof two);
  args[3] = syrah_arg_value(&five, sizeof five);
  st = syrah_queue_submit_kernel(q, lin, &r, acc, 2, args, 4, NULL, 0, NULL);
  return st != SYRAH_SUCCESS ? st : t_launch_rw(q, add, a, N, 3, NULL);
}

/* A graph of three kernels over two buffers, submitted again and again
 * with other work on its buffers in between: a read of one buffer to the
 * host, an eager kernel, a host write, a submission to another queue.
 * A submission that finds the buffers as the previous one left them
 * prepares nothing (counted exactly where the device has USM, where
 * graphs manage their buffers); the others see every change. The data
 * and the bytes and copies each buffer moved equal the same steps run
 * eagerly. */
static void test_buffers_unchanged(const syrah_device *dev, syrah_queue *q, syrah_queue *other,
                                   syrah_program *prog) {
  syrah_kernel *add = kernel(prog, "addv"), *lin = kernel(prog, "lin");
  static int data[2][2][N], seen[N];
  syrah_buffer_stats st[2][2];
  size_t origin[3] = {0, 0, 0}, range[3] = {N, 0, 0};
  int managed = t_has(dev, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS), run, i, k, wrong = 0, seen_wrong = 0;
  if (!add || !lin) return;
  for (run = 0; run < 2; ++run) {
    syrah_buffer *b[2] = {NULL, NULL};
    syrah_graph *g = NULL;
    syrah_graph_exec *x = NULL;
    syrah_graph_exec_stats gs;
    syrah_host_accessor *ha = NULL;
    int *hp = NULL, expect_a = 0;
    /* Submits the step `n` times on `on` (as a graph in run 1). */
#define STEPS(on, n)                                                                          \
  for (k = 0; k < (n); ++k) {                                                                 \
    EXPECT_OK(run ? syrah_queue_submit_graph(on, x, NULL, 0, NULL) : step_three(on, add, lin, b[0], b[1])); \
    expect_a += 4;                                                                            \
  }
    for (i = 0; i < N; ++i) {
      data[run][0][i] = i;
      data[run][1][i] = -1;
    }
    for (k = 0; k < 2; ++k) {
      syrah_buffer_desc desc = t_desc1(N, data[run][k], SYRAH_HOST_WRITE_BACK);
      REQUIRE_OK(syrah_buffer_create(&desc, &b[k]));
    }
    if (run == 1) {
      EXPECT_OK(syrah_queue_begin_recording(q));
      EXPECT_OK(step_three(q, add, lin, b[0], b[1]));
      REQUIRE_OK(syrah_queue_end_recording(q, &g));
      REQUIRE_OK(syrah_graph_finalize(g, &x));
    }
    STEPS(q, 3);
    EXPECT_OK(syrah_buffer_read(b[1], origin, range, seen));
    for (i = 0; i < N; ++i) seen_wrong += seen[i] != (i + expect_a - 3) * 2 + 5;
    STEPS(q, 2);
    EXPECT_OK(t_launch_rw(q, add, b[0], N, 10, NULL));
    expect_a += 10;
    STEPS(q, 2);
    EXPECT_OK(syrah_buffer_host_access(b[0], SYRAH_ACCESS_READ_WRITE, NULL, NULL, &ha, (void **)&hp));
    if (hp) {
      seen_wrong += hp[7] != 7 + expect_a;
      for (i = 0; i < N; ++i) hp[i] -= 100;
    }
    expect_a -= 100;
    if (ha) EXPECT_OK(syrah_host_accessor_release(ha));
    STEPS(q, 2);
    STEPS(other, 2);
    STEPS(q, 1);
    EXPECT_OK(syrah_queue_wait(other));
    EXPECT_OK(syrah_queue_wait(q));
    if (x) {
      EXPECT_OK(syrah_graph_exec_get_stats(x, &gs));
      EXPECT_EQ(gs.submissions, 12);
      /* Prepared: the first; after the read, the eager kernel and the
       * host write; the first on the other queue and the first back. */
      if (managed) EXPECT_EQ(gs.buffers_unchanged, 12 - 6);
    }
#undef STEPS
    for (k = 0; k < 2; ++k) {
      EXPECT_OK(syrah_buffer_get_stats(b[k], &st[run][k]));
      EXPECT_OK(syrah_buffer_release(b[k]));
    }
    if (x) EXPECT_OK(syrah_graph_exec_release(x));
    if (g) EXPECT_OK(syrah_graph_release(g));
    for (i = 0; i < N; ++i)
      wrong += data[run][0][i] != i + expect_a || data[run][1][i] != (i + expect_a - 3) * 2 + 5;
  }
  if (!managed) t_skip("graph submissions counted with unchanged buffers", "the device has no USM device allocations");
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(seen_wrong, 0);
  for (k = 0; k < 2; ++k) {
    EXPECT_EQ(st[1][k].host_to_device_bytes, st[0][k].host_to_device_bytes);
    EXPECT_EQ(st[1][k].device_to_host_bytes, st[0][k].device_to_host_bytes);
    EXPECT_EQ(st[1][k].host_to_device_copies, st[0][k].host_to_device_copies);
    EXPECT_EQ(st[1][k].device_to_host_copies, st[0][k].device_to_host_copies);
  }
  syrah_kernel_release(add);
  syrah_kernel_release(lin);
}

enum { THREADS = 4, SUBMITS = 25 };

typedef struct {
  syrah_queue *q;
  syrah_graph_exec *x;
  syrah_status first_error;
} submitter;

static void *submit_many(void *arg) {
  submitter *s = (submitter *)arg;
  int i;
  for (i = 0; i < SUBMITS; ++i) {
    syrah_status st = syrah_queue_submit_graph(s->q, s->x, NULL, 0, NULL);
    if (st != SYRAH_SUCCESS && s->first_error == SYRAH_SUCCESS) s->first_error = st;
  }
  return NULL;
}

/* One executable graph (four kernels adding 1 to a buffer) submitted by
 * four threads at once to one queue: every submission runs whole, one
 * after another, so the buffer ends with exactly 4 x 4 x 25 added. */
static void test_threads(syrah_queue *q, syrah_program *prog) {
  syrah_kernel *add = kernel(prog, "addv");
  static int data[N];
  syrah_buffer_desc desc = t_desc1(N, data, SYRAH_HOST_WRITE_BACK);
  syrah_buffer *buf = NULL;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  pthread_t th[THREADS];
  submitter sub[THREADS];
  int i, wrong = 0;
  if (!add) return;
  for (i = 0; i < N; ++i) data[i] = i;
  REQUIRE_OK(syrah_buffer_create(&desc, &buf));
  EXPECT_OK(syrah_queue_begin_recording(q));
  for (i = 0; i < 4; ++i) EXPECT_OK(t_launch_rw(q, add, buf, N, 1, NULL));
  REQUIRE_OK(syrah_queue_end_recording(q, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  for (i = 0; i < THREADS; ++i) {
    sub[i].q = q;
    sub[i].x = x;
    sub[i].first_error = SYRAH_SUCCESS;
    if (pthread_create(&th[i], NULL, submit_many, &sub[i]) != 0) T_FAIL("pthread_create");
  }
  for (i = 0; i < THREADS; ++i) {
    pthread_join(th[i], NULL);
    EXPECT_EQ(sub[i].first_error, SYRAH_SUCCESS);
  }
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_OK(syrah_buffer_release(buf));
  for (i = 0; i < N; ++i) wrong += data[i] != i + 4 * THREADS * SUBMITS;
  EXPECT_EQ(wrong, 0);
  syrah_kernel_release(add);
}

static void per_device(const syrah_device *dev) {
  syrah_queue *q = NULL, *ooo = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  REQUIRE_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, dev, 0, NULL, NULL, &ooo));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  if (t_has(dev, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    test_chain(dev, q, prog);
    test_diamond(dev, ooo, prog);
  } else {
    t_skip("USM chain and diamond graphs", "the device has no USM device allocations");
  }
  test_buffers_and_host_tasks(q, prog);
  test_buffers_and_host_tasks(ooo, prog);
  test_threads(q, prog);
  test_threads(ooo, prog);
  test_pages_moved_between_replays(q, prog);
  test_pages_moved_between_replays(ooo, prog);
  test_buffers_unchanged(dev, q, ooo, prog);
  test_buffers_unchanged(dev, ooo, q, prog);
  syrah_program_release(prog);
  syrah_queue_release(ooo);
  syrah_queue_release(q);
  syrah_context_release(ctx);
}

int main(void) {
  t_for_each_device(per_device);
  test_two_device_stencil();
  return t_finish("test_graph");
}
