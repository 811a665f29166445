/* Kernel arguments that point at USM and buffer memory, where the runtime
 * may pass a memory object viewing the memory instead of the pointer
 * (SYRAH_ARG_VIEWS; the default on NVIDIA's OpenCL): one kernel object
 * given an allocation's first byte, then an address inside it, then the
 * first byte again, and the other way round; a freed allocation's address
 * handed out again with a larger size; a trim between launches; a buffer
 * accessed whole and from an offset by one kernel; a graph whose pointer
 * argument is updated between replays. Every element is checked. */
#include "testing.h"

#include <stdint.h>

#define N 1024u

static const char *source =
    "__kernel void add(__global uint *p, uint v) { p[get_global_id(0)] += v; }\n";

typedef struct {
  const syrah_device *d;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_kernel *k[4];
} env;

/* Adds `v` to `n` elements from `p` with kernel `k`. */
static void add(env *e, int k, void *p, size_t n, unsigned v) {
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(n);
  args[0] = syrah_arg_usm(p);
  args[1] = syrah_arg_value(&v, sizeof v);
  EXPECT_OK(syrah_queue_launch(e->q, e->k[k], &r, args, 2, NULL, 0, NULL));
}

/* Checks `n` elements at `p` against `want`. */
static void check(env *e, const void *p, const unsigned *want, size_t n, const char *what) {
  unsigned *got = (unsigned *)calloc(n, sizeof *got);
  size_t i, bad = 0;
  if (!got) exit(1);
  EXPECT_OK(syrah_queue_memcpy(e->q, got, p, n * sizeof *got, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  for (i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      if (bad < 3) T_FAIL("%s: element %zu is %u, not %u", what, i, got[i], want[i]);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0);
  free(got);
}

/* Zeroes `n` elements at `p` and in the model. */
static void zero(env *e, void *p, unsigned *model, size_t n) {
  EXPECT_OK(syrah_queue_memset(e->q, p, 0, n * sizeof(unsigned), NULL, 0, NULL));
  memset(model, 0, n * sizeof *model);
}

static void model_add(unsigned *m, size_t from, size_t n, unsigned v) {
  size_t i;
  for (i = from; i < from + n; ++i) m[i] += v;
}

/* First byte, inside, first byte; and inside first on a second kernel. */
static void pointer_orders(env *e, size_t bytes, const char *what) {
  void *a = NULL;
  unsigned *m = (unsigned *)calloc(N + 64, sizeof *m);
  size_t n = bytes / sizeof(unsigned) < N ? bytes / sizeof(unsigned) : N;
  if (!m) exit(1);
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, bytes, &a));
  zero(e, a, m, n);
  add(e, 0, a, n, 1);
  model_add(m, 0, n, 1);
  add(e, 0, (unsigned *)a + 16, n - 16, 10);
  model_add(m, 16, n - 16, 10);
  add(e, 0, a, n, 100);
  model_add(m, 0, n, 100);
  add(e, 1, (unsigned *)a + 3, n - 3, 1000);
  model_add(m, 3, n - 3, 1000);
  add(e, 1, a, n, 10000);
  model_add(m, 0, n, 10000);
  check(e, a, m, n, what);
  EXPECT_OK(syrah_free(e->ctx, a));
  free(m);
}

/* A freed allocation's address given out again, larger; kernel 2 keeps
 * the old allocation as its argument until then. */
static void reuse(env *e, size_t first, size_t second, const char *what) {
  void *a = NULL, *b = NULL;
  unsigned *m = (unsigned *)calloc(second / sizeof(unsigned), sizeof *m);
  size_t n1 = first / sizeof(unsigned), n2 = second / sizeof(unsigned);
  if (!m) exit(1);
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, first, &a));
  zero(e, a, m, n1);
  add(e, 2, a, n1, 5);
  EXPECT_OK(syrah_free(e->ctx, a));
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, second, &b));
  zero(e, b, m, n2);
  add(e, 2, b, n2, 7);
  model_add(m, 0, n2, 7);
  add(e, 2, b, n2, 9);
  model_add(m, 0, n2, 9);
  check(e, b, m, n2, what);
  EXPECT_OK(syrah_free(e->ctx, b));
  free(m);
}

/* Kept blocks given back between two launches of one kernel. */
static void trim_between(env *e) {
  void *a = NULL, *b = NULL;
  unsigned *m = (unsigned *)calloc(N, sizeof *m);
  size_t bytes = 4u << 20;
  if (!m) exit(1);
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, bytes, &a));
  zero(e, a, m, N);
  add(e, 3, a, N, 3);
  EXPECT_OK(syrah_free(e->ctx, a));
  EXPECT_OK(syrah_context_trim(e->ctx, NULL));
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, bytes, &b));
  zero(e, b, m, N);
  add(e, 3, b, N, 4);
  model_add(m, 0, N, 4);
  check(e, b, m, N, "a launch after a trim");
  EXPECT_OK(syrah_free(e->ctx, b));
  free(m);
}

/* One kernel with a buffer accessed whole, then from element 8, then
 * whole again. */
static void buffer_offsets(env *e) {
  unsigned host[N], m[N];
  syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
  syrah_buffer *b = NULL;
  syrah_host_accessor *ha = NULL;
  unsigned *p = NULL, v;
  syrah_kernel *k = NULL;
  syrah_program *prog = NULL;
  syrah_kernel_arg args[2];
  size_t i, bad = 0;
  int round;
  for (i = 0; i < N; ++i) host[i] = m[i] = (unsigned)i;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  REQUIRE_OK(syrah_program_create_from_source(e->ctx, source, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "add", &k));
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  for (round = 0; round < 6; ++round) {
    size_t off = round % 3 == 1 ? 8 : 0;
    syrah_accessor a = t_window(b, SYRAH_ACCESS_READ_WRITE, off, N - off);
    syrah_range r = syrah_range_1d(N - off);
    v = 1u << round;
    args[1] = syrah_arg_value(&v, sizeof v);
    EXPECT_OK(syrah_queue_submit_kernel(e->q, k, &r, &a, 1, args, 2, NULL, 0, NULL));
    model_add(m, off, N - off, v);
  }
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0; p && i < N; ++i) bad += p[i] != m[i];
  EXPECT_TRUE(p != NULL);
  EXPECT_EQ(bad, 0);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(b));
  syrah_kernel_release(k);
  syrah_program_release(prog);
}

/* A graph of one launch whose pointer goes from a first byte to an
 * address inside and back between replays. */
static void graph_updates(env *e) {
  void *a = NULL;
  unsigned m[N];
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_kernel_arg arg;
  unsigned *targets[3];
  size_t offs[3] = {0, 32, 0};
  int i;
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, N * sizeof(unsigned), &a));
  zero(e, a, m, N);
  EXPECT_OK(syrah_queue_wait(e->q));
  REQUIRE_OK(syrah_queue_begin_recording(e->q));
  add(e, 0, a, N - 32, 1);
  REQUIRE_OK(syrah_queue_end_recording(e->q, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  for (i = 0; i < 3; ++i) {
    targets[i] = (unsigned *)a + offs[i];
    arg = syrah_arg_usm(targets[i]);
    EXPECT_OK(syrah_graph_exec_set_arg(x, 0, 0, &arg));
    EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
    model_add(m, offs[i], N - 32, 1);
  }
  check(e, a, m, N, "a graph's pointer argument updated between replays");
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_OK(syrah_free(e->ctx, a));
}

static void per_device(const syrah_device *d) {
  env e;
  syrah_program *prog = NULL;
  int i;
  memset(&e, 0, sizeof e);
  e.d = d;
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("kernel arguments into device USM", "the device has no device USM");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e.q));
  REQUIRE_OK(syrah_queue_get_context(e.q, &e.ctx));
  REQUIRE_OK(syrah_program_create_from_source(e.ctx, source, NULL, &prog));
  for (i = 0; i < 4; ++i) REQUIRE_OK(syrah_kernel_create(prog, "add", &e.k[i]));
  /* A slot of a shared block, a pooled block, an allocation of its own. */
  pointer_orders(&e, N * sizeof(unsigned), "a 4 KiB allocation");
  pointer_orders(&e, 4u << 20, "a 4 MiB allocation");
  pointer_orders(&e, 48u << 20, "a 48 MiB allocation");
  reuse(&e, 256, 4000, "a slot given out again, larger");
  reuse(&e, 3u << 20, 4u << 20, "a pooled block given out again, larger");
  trim_between(&e);
  buffer_offsets(&e);
  graph_updates(&e);
  for (i = 0; i < 4; ++i) syrah_kernel_release(e.k[i]);
  syrah_program_release(prog);
  syrah_queue_release(e.q);
  syrah_context_release(e.ctx);
}

int main(void) {
  const char *views = getenv("SYRAH_ARG_VIEWS");
  printf("SYRAH_ARG_VIEWS=%s\n", views ? views : "(unset: views on NVIDIA's OpenCL only)");
  t_for_each_device(per_device);
  return t_finish("test_arg_views");
}
