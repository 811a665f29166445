/* Argument updates of finalized graphs: values and USM pointers changed
 * between submissions, each submission checked exactly against a host
 * model, and the graph's counts of submissions, command-buffer recordings
 * and in-place updates checked against what the device says it can do.
 * Run plain (the back end chosen by timing) and with
 * SYRAH_COMMAND_BUFFER=on (every submission through a command-buffer where
 * the device has them). */
#include "testing.h"

static const char *kSource =
    "__kernel void addv(__global int *p, int v) { p[get_global_id(0)] += v; }\n";

enum { N = 256, NODES = 5, ROUNDS = 12 };

/* What node `n` of the model does: adds `val[n]` to buffer `dst[n]`. */
typedef struct {
  int val[NODES];
  int dst[NODES];
  int mem[2][N];
} model;

static void model_run(model *m) {
  int n, i;
  for (n = 0; n < NODES; ++n)
    for (i = 0; i < N; ++i) m->mem[m->dst[n]][i] += m->val[n];
}

static int forced_command_buffers(void) {
  const char *v = getenv("SYRAH_COMMAND_BUFFER");
  return v && strcmp(v, "on") == 0;
}

static void per_device(const syrah_device *dev) {
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *add = NULL;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_graph_backend backend = 0;
  syrah_graph_exec_stats st;
  syrah_range r = syrah_range_1d(N);
  int *mem[2] = {NULL, NULL}, host[N];
  uint64_t in_place = 0;
  model m;
  int n, k, b, i, wrong = 0;
  if (!t_has(dev, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("graph argument updates", "the device has no USM device allocations");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "addv", &add));
  REQUIRE_OK(syrah_device_get_info_u64(dev, SYRAH_DEVICE_INFO_GRAPH_UPDATES_IN_PLACE, &in_place));
  memset(&m, 0, sizeof m);
  for (b = 0; b < 2; ++b) {
    for (i = 0; i < N; ++i) m.mem[b][i] = i * (b + 1);
    REQUIRE_OK(syrah_malloc_device(ctx, dev, sizeof host, (void **)&mem[b]));
    EXPECT_OK(syrah_queue_memcpy(q, mem[b], m.mem[b], sizeof host, NULL, 0, NULL));
  }
  /* The copies read the model's memory, which the rounds change. */
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_queue_begin_recording(q));
  for (n = 0; n < NODES; ++n) {
    syrah_kernel_arg a[2];
    m.val[n] = n + 1;
    m.dst[n] = 0;
    a[0] = syrah_arg_usm(mem[0]);
    a[1] = syrah_arg_value(&m.val[n], sizeof(int));
    EXPECT_OK(syrah_queue_launch(q, add, &r, a, 2, NULL, 0, NULL));
  }
  REQUIRE_OK(syrah_queue_end_recording(q, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  EXPECT_OK(syrah_graph_exec_get_backend(x, &backend));
  /* Round 0 submits as recorded; each later round first changes one
   * node's value or, every third round, the allocation it adds to. */
  for (k = 0; k <= ROUNDS; ++k) {
    if (k > 0) {
      syrah_kernel_arg a;
      n = k % NODES;
      if (k % 3 == 0) {
        m.dst[n] = 1 - m.dst[n];
        a = syrah_arg_usm(mem[m.dst[n]]);
        EXPECT_OK(syrah_graph_exec_set_arg(x, (size_t)n, 0, &a));
      } else {
        m.val[n] = 10 * k + n;
        a = syrah_arg_value(&m.val[n], sizeof(int));
        EXPECT_OK(syrah_graph_exec_set_arg(x, (size_t)n, 1, &a));
      }
    }
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    model_run(&m);
    for (b = 0; b < 2; ++b) {
      EXPECT_OK(syrah_queue_memcpy(q, host, mem[b], sizeof host, NULL, 0, NULL));
      EXPECT_OK(syrah_queue_wait(q));
      for (i = 0; i < N; ++i) wrong += host[i] != m.mem[b][i];
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_OK(syrah_graph_exec_get_stats(x, &st));
  printf("%s back end, updates in place: %s; %llu submissions, %llu command-buffers recorded, "
         "%llu updated in place\n",
         backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "command-buffer" : "replay",
         in_place ? "yes" : "no", (unsigned long long)st.submissions,
         (unsigned long long)st.command_buffer_recordings, (unsigned long long)st.command_buffer_updates);
  EXPECT_EQ(st.submissions, (uint64_t)ROUNDS + 1);
  if (backend != SYRAH_GRAPH_BACKEND_COMMAND_BUFFER) {
    /* No command-buffer is ever made. */
    EXPECT_EQ(st.command_buffer_recordings, 0);
    EXPECT_EQ(st.command_buffer_updates, 0);
  } else if (forced_command_buffers()) {
    /* Every submission is waited for, so one copy serves them all: it
     * takes every update in place; or, without updates in place, it goes
     * stale at the first update and, as every submission follows an
     * update, the nodes are replayed one by one from then on. */
    EXPECT_EQ(st.command_buffer_recordings, 1);
    EXPECT_EQ(st.command_buffer_updates, in_place ? (uint64_t)ROUNDS : 0);
  } else {
    /* Timing picks the back end per submission at first: only bounds. */
    EXPECT_TRUE(st.command_buffer_recordings >= 1);
    EXPECT_TRUE(st.command_buffer_recordings <= (in_place ? 1 : 4));
    EXPECT_TRUE(st.command_buffer_updates <= (uint64_t)ROUNDS);
    if (!in_place) EXPECT_EQ(st.command_buffer_updates, 0);
  }
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  for (b = 0; b < 2; ++b) EXPECT_OK(syrah_free(ctx, mem[b]));
  syrah_kernel_release(add);
  syrah_program_release(prog);
  syrah_queue_release(q);
  syrah_context_release(ctx);
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_graph_update");
}
