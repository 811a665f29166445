/* Kernel arguments reach the driver only when they change: with the
 * faultcl library counting clSetKernelArg, launches of one kernel object
 * through one buffer with the same value set nothing after the first, a
 * new value sets that argument alone, and a value longer than 16 bytes is
 * set at every launch. A failed setting is reported, and the next launch
 * sets the argument again. Buffers made and released one after another
 * while one kernel object names them each get their own launches, whatever
 * handles the driver hands out again. A buffer made after one of its size
 * was released takes over that buffer's memory object (no new one is made)
 * until the context gives its kept memory back. Every element is checked.
 * Devices the CUDA back end drives take their arguments with each launch:
 * skipped there. */
#include "faultcl.h"
#include "testing.h"

#define N 256
#define NEVER (1 << 30)
#define CL_OUT_OF_RESOURCES (-5)

static const char *source =
    "__kernel void add(__global int *p, int v) { p[get_global_id(0)] += v; }\n"
    "__kernel void add8(__global int *p, int8 v) { p[get_global_id(0)] += v.s0 + v.s7; }\n";

/* Launches `k` over `b` with the value `v` of `size` bytes, counting the
 * arguments set meanwhile; -1 when the launch failed. */
static int launch(syrah_queue *q, syrah_kernel *k, syrah_buffer *b, const void *v, size_t size, int fail) {
  syrah_accessor a = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[2];
  syrah_status s;
  int set;
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(v, size);
  faultcl_arm("clSetKernelArg", fail ? 1 : NEVER, 1, CL_OUT_OF_RESOURCES);
  s = syrah_queue_submit_kernel(q, k, &r, &a, 1, args, 2, NULL, 0, NULL);
  set = faultcl_disarm();
  return s == SYRAH_SUCCESS ? set : -1;
}

/* Checks every element of `b` against `want`. */
static void check(syrah_buffer *b, int want, const char *what) {
  syrah_host_accessor *h = NULL;
  int *p = NULL, i, bad = 0;
  REQUIRE_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &h, (void **)&p));
  for (i = 0; i < N; ++i) {
    if (p[i] != want) {
      if (bad < 3) T_FAIL("%s: element %d is %d, not %d", what, i, p[i], want);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_OK(syrah_host_accessor_release(h));
}

/* Forty buffers, each made, launched on and released after its check
 * while the next ones are in use: the kernel's memory argument, set
 * before, may name a released object whose handle comes back for a new
 * one, and is set again all the same (`mem`: 1 where the buffer reaches
 * the kernel as a memory object, whose setting is counted, else 0). The
 * context gives back the memory it keeps after each release, so that the
 * driver may hand out the released handles again. Each launch adds 1 to
 * the new buffer, then 1 to the one made before it. */
static void churn(syrah_context *ctx, syrah_queue *q, syrah_kernel *k, int mem) {
  static int zeros[N];
  syrah_buffer *live[3] = {NULL, NULL, NULL};
  int want[3] = {0, 0, 0}, made[3] = {0, 0, 0}, r, one = 1;
  char what[64];
  for (r = 0; r < 40; ++r) {
    syrah_buffer_desc bd = t_desc1(N, zeros, SYRAH_HOST_COPY_IN);
    int slot = r % 3, prev = (r + 2) % 3;
    if (live[slot]) {
      snprintf(what, sizeof what, "buffer %d of the churn", made[slot]);
      check(live[slot], want[slot], what);
      EXPECT_OK(syrah_buffer_release(live[slot]));
    }
    EXPECT_OK(syrah_context_trim(ctx, NULL));
    REQUIRE_OK(syrah_buffer_create(&bd, &live[slot]));
    made[slot] = r;
    want[slot] = 1;
    /* The first also sets the value (2 before). */
    EXPECT_EQ(launch(q, k, live[slot], &one, sizeof one, 0), mem + (r == 0));
    if (live[prev]) {
      EXPECT_EQ(launch(q, k, live[prev], &one, sizeof one, 0), mem);
      want[prev] += 1;
    }
  }
  for (r = 0; r < 3; ++r) {
    snprintf(what, sizeof what, "buffer %d of the churn", made[r]);
    check(live[r], want[r], what);
    EXPECT_OK(syrah_buffer_release(live[r]));
  }
}

/* Launches `k` adding 1 over a new buffer of zeros, counting the memory
 * objects made meanwhile, and checks the result. */
static int made_for(syrah_queue *q, syrah_kernel *k, syrah_buffer **out) {
  static int zeros[N];
  syrah_buffer_desc bd = t_desc1(N, zeros, SYRAH_HOST_COPY_IN);
  syrah_accessor a;
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[2];
  int one = 1, made;
  if (syrah_buffer_create(&bd, out) != SYRAH_SUCCESS) {
    T_FAIL("buffer of the reuse: %s", syrah_last_error_message());
    return -1;
  }
  a = t_whole(*out, SYRAH_ACCESS_READ_WRITE);
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&one, sizeof one);
  faultcl_arm("clCreateBuffer", NEVER, 1, CL_OUT_OF_RESOURCES);
  EXPECT_OK(syrah_queue_submit_kernel(q, k, &r, &a, 1, args, 2, NULL, 0, NULL));
  made = faultcl_disarm();
  check(*out, 1, "a buffer of the reuse");
  return made;
}

/* Where buffers are memory objects: a released buffer's object goes to
 * the next buffer of its size, whose data is still its own, and a launch
 * through it sets nothing (the kernel names that object already); once
 * the context gives its kept memory back, a new object is made. */
static void reuse(syrah_context *ctx, syrah_queue *q, syrah_kernel *k) {
  syrah_buffer *b = NULL;
  int one = 1;
  EXPECT_OK(syrah_context_trim(ctx, NULL));
  EXPECT_EQ(made_for(q, k, &b), 1);
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_EQ(made_for(q, k, &b), 0);
  EXPECT_EQ(launch(q, k, b, &one, sizeof one, 0), 0);
  check(b, 2, "the buffer that took over a released one's memory");
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_context_trim(ctx, NULL));
  EXPECT_EQ(made_for(q, k, &b), 1);
  EXPECT_OK(syrah_buffer_release(b));
}

static void per_device(const syrah_device *d) {
  uint64_t backend = 0;
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *k = NULL, *k8 = NULL;
  syrah_buffer *b = NULL;
  static int zeros[N];
  syrah_buffer_desc bd = t_desc1(N, zeros, SYRAH_HOST_COPY_IN);
  int one = 1, two = 2, first, total = 0;
  int eight[8] = {1, 0, 0, 0, 0, 0, 0, 10};
  REQUIRE_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend));
  if (backend == SYRAH_BACKEND_CUDA) {
    t_skip("argument setting", "the CUDA back end passes the arguments with each launch: nothing is set");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "add", &k));
  REQUIRE_OK(syrah_kernel_create(prog, "add8", &k8));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* The value, and the buffer's memory object where the kernel takes one
   * (a USM pointer is passed through another call). */
  first = launch(q, k, b, &one, sizeof one, 0);
  EXPECT_TRUE(first == 1 || first == 2);
  total += 1;
  EXPECT_EQ(launch(q, k, b, &one, sizeof one, 0), 0);
  EXPECT_EQ(launch(q, k, b, &one, sizeof one, 0), 0);
  total += 2;
  EXPECT_EQ(launch(q, k, b, &two, sizeof two, 0), 1);
  EXPECT_EQ(launch(q, k, b, &two, sizeof two, 0), 0);
  total += 4;
  EXPECT_EQ(launch(q, k, b, &one, sizeof one, 0), 1);
  total += 1;
  /* A failed setting: the launch fails, and the next sets the value. */
  EXPECT_EQ(launch(q, k, b, &two, sizeof two, 1), -1);
  EXPECT_TRUE(strstr(syrah_last_error_message(), "clSetKernelArg") != NULL);
  EXPECT_EQ(launch(q, k, b, &two, sizeof two, 0), 1);
  EXPECT_EQ(launch(q, k, b, &two, sizeof two, 0), 0);
  total += 4;
  /* 32 bytes: set at every launch, the buffer at the first alone. */
  EXPECT_EQ(launch(q, k8, b, eight, sizeof eight, 0), first);
  EXPECT_EQ(launch(q, k8, b, eight, sizeof eight, 0), 1);
  total += 22;
  EXPECT_OK(syrah_queue_wait(q));
  check(b, total, "after the launches");
  EXPECT_OK(syrah_buffer_release(b));
  churn(ctx, q, k, first - 1);
  if (first == 2) reuse(ctx, q, k);
  EXPECT_OK(syrah_kernel_release(k8));
  EXPECT_OK(syrah_kernel_release(k));
  EXPECT_OK(syrah_program_release(prog));
  EXPECT_OK(syrah_context_release(ctx));
  EXPECT_OK(syrah_queue_release(q));
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_arg_setting");
}
