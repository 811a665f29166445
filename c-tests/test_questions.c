/* Status questions: NVIDIA's OpenCL charges microseconds for each
 * clGetEventInfo, so commands must not ask the driver about what they
 * follow when the queue's order already settles it. Here a graph of two
 * independent long kernels is replayed on an in-order queue and twenty
 * eager launches follow at once, while the replay still runs; with the
 * fault library counting clGetEventInfo, they ask nothing. Every result is
 * checked against the host. Devices the CUDA back end drives make no
 * OpenCL calls: skipped there. */
#include "faultcl.h"
#include "testing.h"

#define NEVER (1 << 30)
#define LAUNCHES 20

static const char *source =
    "__kernel void spin(__global uint *p, int n) {\n"
    "  uint x = p[get_global_id(0)];\n"
    "  for (int j = 0; j < n; ++j) x = x * 1664525u + 1013904223u;\n"
    "  p[get_global_id(0)] = x;\n"
    "}\n"
    "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n";

static uint32_t spun(int n) {
  uint32_t x = 0;
  int j;
  for (j = 0; j < n; ++j) x = x * 1664525u + 1013904223u;
  return x;
}

static void per_device(const syrah_device *d) {
  uint64_t backend = 0;
  syrah_queue *q = NULL, *rec = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *spin = NULL, *inc = NULL;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  uint32_t *a = NULL, *b = NULL, ha = 0, hb = 0;
  int *c = NULL, hc = 0, i, n = 20000000, asked;
  syrah_range one = syrah_range_1d(1);
  syrah_kernel_arg sa[2], sb[2], ca;
  REQUIRE_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend));
  if (backend == SYRAH_BACKEND_CUDA) {
    t_skip("status questions", "the CUDA back end makes no OpenCL calls to count");
    return;
  }
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("status questions", "the device has no USM device allocations");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &rec));
  REQUIRE_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "spin", &spin));
  REQUIRE_OK(syrah_kernel_create(prog, "inc", &inc));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof *a, (void **)&a));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof *b, (void **)&b));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof *c, (void **)&c));
  EXPECT_OK(syrah_queue_memset(q, a, 0, sizeof *a, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memset(q, b, 0, sizeof *b, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memset(q, c, 0, sizeof *c, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  sa[0] = syrah_arg_usm(a);
  sa[1] = syrah_arg_value(&n, sizeof n);
  sb[0] = syrah_arg_usm(b);
  sb[1] = syrah_arg_value(&n, sizeof n);
  ca = syrah_arg_usm(c);
  /* Two independent kernels: the graph's end joins two lanes. */
  REQUIRE_OK(syrah_queue_begin_recording(rec));
  EXPECT_OK(syrah_queue_launch(rec, spin, &one, sa, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_launch(rec, spin, &one, sb, 2, NULL, 0, NULL));
  REQUIRE_OK(syrah_queue_end_recording(rec, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  /* The first launch of `inc` builds what it needs before counting. */
  EXPECT_OK(syrah_queue_launch(q, inc, &one, &ca, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  faultcl_arm("clGetEventInfo", NEVER, 1, 0);
  EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
  for (i = 0; i < LAUNCHES; ++i) EXPECT_OK(syrah_queue_launch(q, inc, &one, &ca, 1, NULL, 0, NULL));
  asked = faultcl_disarm();
  EXPECT_EQ(asked, 0);
  EXPECT_OK(syrah_queue_memcpy(q, &ha, a, sizeof ha, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, &hb, b, sizeof hb, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, &hc, c, sizeof hc, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(ha, spun(n));
  EXPECT_EQ(hb, spun(n));
  EXPECT_EQ(hc, LAUNCHES + 1);
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_OK(syrah_free(ctx, a));
  EXPECT_OK(syrah_free(ctx, b));
  EXPECT_OK(syrah_free(ctx, c));
  EXPECT_OK(syrah_kernel_release(inc));
  EXPECT_OK(syrah_kernel_release(spin));
  EXPECT_OK(syrah_program_release(prog));
  EXPECT_OK(syrah_queue_release(rec));
  EXPECT_OK(syrah_context_release(ctx));
  EXPECT_OK(syrah_queue_release(q));
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_questions");
}
