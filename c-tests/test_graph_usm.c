/* USM copies and fills inside graphs: between USM allocations (which the
 * graph enqueues itself) and with ordinary host memory (which goes through
 * the queue at every replay), on an in-order queue (a chain) and on an
 * out-of-order one (two branches joined by events); every replay is
 * compared with the same commands run eagerly and with a closed form.
 * With SYRAH_VALIDATE=1, a replay whose copy touches a freed allocation is
 * refused, naming the node. */
#include "testing.h"

static const char *kSource =
    "__kernel void addv(__global int *p, int v) { p[get_global_id(0)] += v; }\n"
    "__kernel void sum2(__global const int *x, __global const int *y, __global int *d)\n"
    "{ size_t i = get_global_id(0); d[i] = x[i] + y[i]; }\n";

enum { N = 1024, REPLAYS = 5, SEVEN = 7 };

typedef struct {
  syrah_queue *q;
  syrah_kernel *add, *sum;
  syrah_range r;
} env;

/* The commands of one step on `a`, `b`, `c` (and `h`, host memory, when
 * not NULL): a += 1; b = a; b += 10; c = 7 (a fill); h = b. */
static void step(env *e, int *a, int *b, int *c, int *h) {
  int one = 1, ten = 10, seven = SEVEN;
  syrah_kernel_arg x[2];
  x[0] = syrah_arg_usm(a);
  x[1] = syrah_arg_value(&one, sizeof one);
  EXPECT_OK(syrah_queue_launch(e->q, e->add, &e->r, x, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(e->q, b, a, N * sizeof(int), NULL, 0, NULL));
  x[0] = syrah_arg_usm(b);
  x[1] = syrah_arg_value(&ten, sizeof ten);
  EXPECT_OK(syrah_queue_launch(e->q, e->add, &e->r, x, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_fill(e->q, c, &seven, sizeof seven, N * sizeof(int), NULL, 0, NULL));
  if (h) EXPECT_OK(syrah_queue_memcpy(e->q, h, b, N * sizeof(int), NULL, 0, NULL));
}

/* Reads `n` ints of `p` into `out` (waiting). */
static void read_back(env *e, int *out, const int *p) {
  EXPECT_OK(syrah_queue_memcpy(e->q, out, p, N * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
}

/* The chain, with and without the copy to host memory, replayed and run
 * eagerly side by side. */
static void test_chain(const syrah_device *dev, syrah_context *ctx, env *e, bool to_host) {
  int *m[6] = {NULL, NULL, NULL, NULL, NULL, NULL}, i, k, wrong = 0;
  static int h_graph[N], h_eager[N], got[N], want[N];
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  for (i = 0; i < 6; ++i) {
    REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&m[i]));
    EXPECT_OK(syrah_queue_memset(e->q, m[i], 0, N * sizeof(int), NULL, 0, NULL));
  }
  EXPECT_OK(syrah_queue_wait(e->q));
  EXPECT_OK(syrah_queue_begin_recording(e->q));
  step(e, m[0], m[1], m[2], to_host ? h_graph : NULL);
  REQUIRE_OK(syrah_queue_end_recording(e->q, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  for (k = 1; k <= REPLAYS; ++k) {
    EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
    step(e, m[3], m[4], m[5], to_host ? h_eager : NULL);
    EXPECT_OK(syrah_queue_wait(e->q));
    for (i = 0; i < 3; ++i) {
      read_back(e, got, m[i]);
      read_back(e, want, m[i + 3]);
      for (int j = 0; j < N; ++j) {
        int closed = i == 0 ? k : i == 1 ? k + 10 : SEVEN;
        wrong += got[j] != want[j] || got[j] != closed;
      }
    }
    if (to_host)
      for (i = 0; i < N; ++i) wrong += h_graph[i] != k + 10 || h_eager[i] != k + 10;
  }
  EXPECT_EQ(wrong, 0);
  printf("chain of kernels, copies and a fill%s: %d replays equal to eager\n",
         to_host ? " (and a copy to host memory)" : "", REPLAYS);
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  for (i = 0; i < 6; ++i) EXPECT_OK(syrah_free(ctx, m[i]));
}

/* On an out-of-order queue: (a += 1; b = a) and (c = 7) in parallel,
 * then d = b + c, joined by the recorded events. */
static void test_branches(const syrah_device *dev, syrah_context *ctx, syrah_kernel *add, syrah_kernel *sum) {
  syrah_queue *ooo = NULL;
  int *a = NULL, *b = NULL, *c = NULL, *d = NULL, k, i, wrong = 0, one = 1, seven = SEVEN;
  static int got[N];
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_event *e1 = NULL, *e2 = NULL, *e3 = NULL;
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[3];
  REQUIRE_OK(syrah_queue_create(ctx, dev, 0, NULL, NULL, &ooo));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&a));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&b));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&c));
  REQUIRE_OK(syrah_malloc_device(ctx, dev, N * sizeof(int), (void **)&d));
  EXPECT_OK(syrah_queue_memset(ooo, a, 0, N * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(ooo));
  EXPECT_OK(syrah_queue_begin_recording(ooo));
  args[0] = syrah_arg_usm(a);
  args[1] = syrah_arg_value(&one, sizeof one);
  EXPECT_OK(syrah_queue_launch(ooo, add, &r, args, 2, NULL, 0, &e1));
  EXPECT_OK(syrah_queue_memcpy(ooo, b, a, N * sizeof(int), (const syrah_event *const *)&e1, 1, &e2));
  EXPECT_OK(syrah_queue_fill(ooo, c, &seven, sizeof seven, N * sizeof(int), NULL, 0, &e3));
  {
    const syrah_event *both[2];
    both[0] = e2;
    both[1] = e3;
    args[0] = syrah_arg_usm(b);
    args[1] = syrah_arg_usm(c);
    args[2] = syrah_arg_usm(d);
    EXPECT_OK(syrah_queue_launch(ooo, sum, &r, args, 3, both, 2, NULL));
  }
  REQUIRE_OK(syrah_queue_end_recording(ooo, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  for (k = 1; k <= REPLAYS; ++k) {
    syrah_event *done = NULL;
    /* An out-of-order queue: the read waits for the replay's event. */
    EXPECT_OK(syrah_queue_submit_graph(ooo, x, NULL, 0, &done));
    EXPECT_OK(syrah_queue_memcpy(ooo, got, d, sizeof got, (const syrah_event *const *)&done, 1, NULL));
    EXPECT_OK(syrah_queue_wait(ooo));
    EXPECT_OK(syrah_event_release(done));
    for (i = 0; i < N; ++i) wrong += got[i] != k + SEVEN;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_OK(syrah_event_release(e1));
  EXPECT_OK(syrah_event_release(e2));
  EXPECT_OK(syrah_event_release(e3));

  /* A copy whose destination was freed since (only the copy and a later
   * kernel use it): refused with validation on, naming the copy. */
  if (getenv("SYRAH_VALIDATE") && strcmp(getenv("SYRAH_VALIDATE"), "1") == 0) {
    EXPECT_OK(syrah_free(ctx, b));
    b = NULL;
    EXPECT_ERR(syrah_queue_submit_graph(ooo, x, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER, "memcpy of");
  } else {
    t_skip("a graph copy from a freed allocation", "refused only with SYRAH_VALIDATE=1");
  }
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_OK(syrah_free(ctx, a));
  if (b) EXPECT_OK(syrah_free(ctx, b));
  EXPECT_OK(syrah_free(ctx, c));
  EXPECT_OK(syrah_free(ctx, d));
  EXPECT_OK(syrah_queue_release(ooo));
}

static void per_device(const syrah_device *dev) {
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  env e;
  if (!t_has(dev, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("USM copies and fills in graphs", "the device has no USM device allocations");
    return;
  }
  memset(&e, 0, sizeof e);
  e.r = syrah_range_1d(N);
  REQUIRE_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e.q));
  REQUIRE_OK(syrah_queue_get_context(e.q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "addv", &e.add));
  REQUIRE_OK(syrah_kernel_create(prog, "sum2", &e.sum));
  test_chain(dev, ctx, &e, false);
  test_chain(dev, ctx, &e, true);
  test_branches(dev, ctx, e.add, e.sum);
  syrah_kernel_release(e.add);
  syrah_kernel_release(e.sum);
  syrah_program_release(prog);
  syrah_queue_release(e.q);
  syrah_context_release(ctx);
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_graph_usm");
}
