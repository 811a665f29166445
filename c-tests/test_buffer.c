/* Buffers: accessors, page-granular transfers with exact counts, inferred
 * dependencies, host accessors, host-memory ownership, allocators,
 * reinterpretation, and several devices and contexts. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <time.h>

static const char *kSource =
    "__kernel void twice(__global int *p) { p[get_global_id(0)] *= 2; }\n"
    "__kernel void setv(__global int *p, int v) { p[get_global_id(0)] = v; }\n"
    "__kernel void copyk(__global const int *a, __global int *b) {\n"
    "  b[get_global_id(0)] = a[get_global_id(0)] + 1; }\n"
    "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n"
    "__kernel void peek(__global const int *p, int pitch) { (void)p; (void)pitch; }\n"
    "__kernel void rows(__global int *p, int pitch) {\n"
    "  p[get_global_id(0) * pitch + get_global_id(1)] = (int)(get_global_id(0) * 1000 + get_global_id(1)); }\n";

enum { N = 1 << 16 }; /* 256 KiB of ints: one default page */

typedef struct {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *twice, *setv, *copyk, *rows, *peek, *inc;
} env;

static bool env_open_in(env *e, syrah_context *ctx, const syrah_device *d, syrah_queue_flags flags) {
  memset(e, 0, sizeof *e);
  e->dev = d;
  if (syrah_queue_create(ctx, d, flags, NULL, NULL, &e->q) != SYRAH_SUCCESS) return false;
  if (syrah_queue_get_context(e->q, &e->ctx) != SYRAH_SUCCESS) return false;
  if (syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) != SYRAH_SUCCESS) return false;
  return syrah_kernel_create(e->prog, "twice", &e->twice) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "setv", &e->setv) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "copyk", &e->copyk) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "rows", &e->rows) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "peek", &e->peek) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "inc", &e->inc) == SYRAH_SUCCESS;
}

static bool env_open(env *e, const syrah_device *d, syrah_queue_flags flags) {
  return env_open_in(e, NULL, d, flags);
}

static void env_close(env *e) {
  if (e->twice) syrah_kernel_release(e->twice);
  if (e->setv) syrah_kernel_release(e->setv);
  if (e->copyk) syrah_kernel_release(e->copyk);
  if (e->rows) syrah_kernel_release(e->rows);
  if (e->peek) syrah_kernel_release(e->peek);
  if (e->inc) syrah_kernel_release(e->inc);
  if (e->prog) syrah_program_release(e->prog);
  if (e->q) syrah_queue_release(e->q);
  if (e->ctx) syrah_context_release(e->ctx);
}

static syrah_accessor acc1(syrah_buffer *b, syrah_access_mode m, size_t off, size_t n) {
  syrah_accessor a;
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = m;
  a.offset[0] = off;
  a.range[0] = n;
  return a;
}

/* Runs `k` over `n` work-items with one accessor (and an int if `v`). */
static syrah_status run1(env *e, syrah_kernel *k, syrah_accessor a, size_t n, const int *v, syrah_event **ev) {
  syrah_range r = syrah_range_1d(n);
  syrah_kernel_arg args[2];
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  if (v) args[1] = syrah_arg_value(v, sizeof *v);
  return syrah_queue_submit_kernel(e->q, k, &r, &a, 1, args, v ? 2 : 1, NULL, 0, ev);
}

/* Arguments 0 and 1 bound to accessors 0 and 1. */
static void two_accessor_args(syrah_kernel_arg *args) {
  int i;
  for (i = 0; i < 2; ++i) {
    args[i].kind = SYRAH_ARG_ACCESSOR;
    args[i].size = (size_t)i;
    args[i].value = NULL;
  }
}

static syrah_buffer_stats stats(syrah_buffer *b) {
  syrah_buffer_stats s;
  memset(&s, 0, sizeof s);
  syrah_buffer_get_stats(b, &s);
  return s;
}

/* Whether the first `n` ints of `b`, read on the host, all equal `want`. */
static bool all_equal(syrah_buffer *b, size_t n, int want) {
  syrah_host_accessor *ha = NULL;
  int *p = NULL;
  bool ok = true;
  size_t i;
  if (syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p) != SYRAH_SUCCESS) {
    T_FAIL("host access: %s", syrah_last_error_message());
    return false;
  }
  for (i = 0; i < n; ++i) ok = ok && p[i] == want;
  if (syrah_host_accessor_release(ha) != SYRAH_SUCCESS) {
    T_FAIL("host accessor release: %s", syrah_last_error_message());
    return false;
  }
  return ok;
}

static void test_basics(const syrah_device *d) {
  env e;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, i, ok, seven = 7;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_WRITE_BACK);
  syrah_host_accessor *ha = NULL;
  syrah_buffer_stats s;
  syrah_buffer_info info;
  void *dp1 = NULL, *dp2 = NULL;
  syrah_usm_alloc t = 0;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    return;
  }
  for (i = 0; i < N; ++i) host[i] = i;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(syrah_buffer_get_info(b, &info));
  EXPECT_EQ(info.dimensions, 1);
  EXPECT_EQ(info.range[0], N);
  EXPECT_EQ(info.page_size[0], N); /* 256 KiB of ints: the default page */
  EXPECT_EQ(info.size_bytes, N * sizeof(int));
  EXPECT_EQ(info.row_pitch, N * sizeof(int));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 0); /* nothing moves before a device uses it */

  /* First use: one copy of the whole buffer; a second use moves nothing. */
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, N * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 1);
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, N * sizeof(int));
  EXPECT_EQ(s.device_to_host_bytes, 0);

  /* The device pointer is stable, and a device USM pointer of the context;
   * a device without USM has none. */
  if (t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &dp1));
    EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &dp2));
    EXPECT_TRUE(dp1 != NULL && dp1 == dp2);
    EXPECT_OK(syrah_get_pointer_type(e.ctx, dp1, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_DEVICE);
  } else {
    EXPECT_ERR(syrah_buffer_get_device_pointer(b, e.q, &dp1), SYRAH_ERROR_FEATURE_NOT_SUPPORTED, "has no USM");
  }

  /* A host accessor brings the data home once. */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 4 * i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  s = stats(b);
  EXPECT_EQ(s.device_to_host_bytes, N * sizeof(int));
  EXPECT_EQ(s.device_to_host_copies, 1);
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_EQ(stats(b).device_to_host_bytes, N * sizeof(int));

  /* A host write outdates the device copy; the next kernel fetches it. */
  {
    size_t off = 100, rng = 10;
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, &off, &rng, &ha, (void **)&p));
    p[0] = -5; /* element 100 */
    EXPECT_OK(syrah_host_accessor_release(ha));
  }
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 2 * N * sizeof(int));

  /* Discard modes never transfer. */
  EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), N, &seven, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 2 * N * sizeof(int));

  /* Errors, before anything moves. */
  EXPECT_ERR(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, N - 2, 4), 4, NULL, NULL),
             SYRAH_ERROR_INVALID_ARGUMENT, "does not fit");
  EXPECT_ERR(run1(&e, e.twice, acc1(b, 9, 0, 0), N, NULL, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "unknown access mode 9");
  {
    syrah_accessor a = acc1(b, SYRAH_ACCESS_READ, 0, 0);
    syrah_range r = syrah_range_1d(4);
    syrah_kernel_arg arg;
    arg.kind = SYRAH_ARG_ACCESSOR;
    arg.size = 3;
    arg.value = NULL;
    EXPECT_ERR(syrah_queue_submit_kernel(e.q, e.twice, &r, &a, 1, &arg, 1, NULL, 0, NULL),
               SYRAH_ERROR_KERNEL_ARGUMENTS, "names accessor 3 but the command group has 1");
    EXPECT_ERR(syrah_queue_submit_kernel(e.q, e.twice, &r, NULL, 1, &arg, 1, NULL, 0, NULL),
               SYRAH_ERROR_NULL_ARGUMENT, "accessors");
    a.buffer = NULL;
    EXPECT_ERR(syrah_queue_submit_kernel(e.q, e.twice, &r, &a, 1, &arg, 1, NULL, 0, NULL),
               SYRAH_ERROR_NULL_ARGUMENT, "accessors[0].buffer");
  }
  EXPECT_ERR(syrah_buffer_host_access(b, 0, NULL, NULL, &ha, (void **)&p), SYRAH_ERROR_INVALID_ARGUMENT,
             "unknown access mode 0");
  EXPECT_ERR(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, NULL, (void **)&p),
             SYRAH_ERROR_NULL_ARGUMENT, "out_accessor");

  /* Release writes the final data back into the host memory. */
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 7;
  EXPECT_TRUE(ok);
  env_close(&e);
  free(host);
}

static void test_pages(const syrah_device *d) {
  env e;
  enum { R = 64, C = 64 };
  int *host = (int *)malloc(R * C * sizeof(int)), *p = NULL, i, ok, pitch = C;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_host_accessor *ha = NULL;
  syrah_buffer_stats s;
  syrah_accessor a;
  syrah_range r;
  syrah_kernel_arg args[2];
  uint64_t rect = 0;
  if (!env_open(&e, d, 0)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    return;
  }
  for (i = 0; i < R * C; ++i) host[i] = -1;
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 2;
  bd.range[0] = R;
  bd.range[1] = C;
  bd.page_size[0] = 16;
  bd.page_size[1] = 16; /* 4 x 4 pages of 16 x 16 ints */
  bd.host_pointer = host;
  bd.ownership = SYRAH_HOST_WRITE_BACK;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));

  /* Rows 16..31, all columns: one row of pages, contiguous: one copy. */
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = SYRAH_ACCESS_READ_WRITE;
  a.offset[0] = 16;
  a.range[0] = 16;
  a.range[1] = C;
  r = syrah_range_2d(16, C);
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&pitch, sizeof pitch);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.rows, &r, &a, 1, args, 2, NULL, 0, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 16 * C * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 1);

  /* Rows 8..23, columns 32..39, read: pages rows 0-1 x column 2; row 1 is
   * current on the device already, so only page (0, 2) moves: one
   * rectangular copy, or its 16 rows where the device has none. */
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BUFFER_RECT_COPIES, &rect));
  a.offset[0] = 8;
  a.offset[1] = 32;
  a.range[0] = 16;
  a.range[1] = 8;
  a.mode = SYRAH_ACCESS_READ;
  r = syrah_range_2d(16, 8);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.peek, &r, &a, 1, args, 2, NULL, 0, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 16 * C * sizeof(int) + 16 * 16 * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 1 + (rect ? 1 : 16));

  /* The host reads everything: only the written row of pages comes back,
   * in one contiguous copy. */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < R * C; ++i) {
    int row = i / C, col = i % C;
    int want = (row >= 16 && row < 32) ? (row - 16) * 1000 + col : -1;
    ok &= p[i] == want;
  }
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  s = stats(b);
  EXPECT_EQ(s.device_to_host_bytes, 16 * C * sizeof(int));
  EXPECT_EQ(s.device_to_host_copies, 1);

  /* A 2D box inside one page: written on the device, read back on the
   * host through a ranged host accessor with the buffer's pitch. */
  a.offset[0] = 40;
  a.offset[1] = 32;
  a.range[0] = 8;
  a.range[1] = 8;
  a.mode = SYRAH_ACCESS_READ_WRITE;
  r = syrah_range_2d(8, 8);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.rows, &r, &a, 1, args, 2, NULL, 0, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 16 * C * sizeof(int) + 2 * 16 * 16 * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 1 + 2 * (rect ? 1 : 16));
  {
    size_t off[2] = {40, 32}, rng[2] = {8, 8};
    int y, x;
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, off, rng, &ha, (void **)&p));
    for (y = 0, ok = 1; y < 8; ++y)
      for (x = 0; x < 8; ++x) ok &= p[y * C + x] == y * 1000 + x;
    EXPECT_TRUE(ok);
    EXPECT_OK(syrah_host_accessor_release(ha));
    s = stats(b);
    EXPECT_EQ(s.device_to_host_bytes, 16 * C * sizeof(int) + 16 * 16 * sizeof(int));
    EXPECT_EQ(s.device_to_host_copies, 1 + (rect ? 1 : 16));
  }
  /* Released: the page written last returns home before the write-back. */
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < R * C; ++i) {
    int row = i / C, col = i % C;
    int want = (row >= 16 && row < 32) ? (row - 16) * 1000 + col
               : (row >= 40 && row < 48 && col >= 32 && col < 40) ? (row - 40) * 1000 + col - 32
                                                                  : -1;
    ok &= host[i] == want;
  }
  EXPECT_TRUE(ok);
  env_close(&e);
  free(host);
}

static void test_uninitialised_and_ownership(const syrah_device *d) {
  env e;
  int *host = (int *)malloc(N * sizeof(int)), *other = (int *)malloc(N * sizeof(int)), *p = NULL, i, ok, v = 3;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *ha = NULL;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    free(other);
    return;
  }
  /* No data: reading moves nothing. */
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 0);
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_EQ(stats(b).device_to_host_bytes, N * sizeof(int)); /* the kernel wrote it */
  /* set_final_data to another pointer. */
  EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), N, &v, NULL));
  EXPECT_OK(syrah_buffer_set_final_data(b, other));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= other[i] == 3;
  EXPECT_TRUE(ok);

  /* Copy-in: the memory may be reused at once; nothing comes back. */
  for (i = 0; i < N; ++i) host[i] = 10;
  bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  for (i = 0; i < N; ++i) host[i] = 99; /* reused at once */
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 20; /* 2 x the copied 10 */
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 99;
  EXPECT_TRUE(ok);

  /* Read-only data is never written, even when the buffer is: a host
   * accessor that writes, and one that only reads, both see the device's
   * data in a private copy. */
  for (i = 0; i < N; ++i) host[i] = 5;
  bd = t_desc1(N, host, SYRAH_HOST_READ_ONLY);
  {
    static const syrah_access_mode modes[2] = {SYRAH_ACCESS_READ_WRITE, SYRAH_ACCESS_READ};
    int m;
    for (m = 0; m < 2; ++m) {
      REQUIRE_OK(syrah_buffer_create(&bd, &b));
      EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
      EXPECT_OK(syrah_buffer_host_access(b, modes[m], NULL, NULL, &ha, (void **)&p));
      for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 10;
      EXPECT_TRUE(ok);
      EXPECT_TRUE(p != host);
      EXPECT_OK(syrah_host_accessor_release(ha));
      EXPECT_OK(syrah_buffer_release(b));
      for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 5;
      EXPECT_TRUE(ok);
    }
  }

  /* A kernel writes one page of four: the private copy takes the other
   * three from the user's memory and the fourth from the device. */
  bd.page_size[0] = N / 4;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  {
    int v = -3;
    EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, N / 4, N / 4), N / 4, &v, NULL));
  }
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == (i >= N / 4 && i < N / 2 ? -3 : 5);
  EXPECT_TRUE(ok);
  EXPECT_TRUE(p != host);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_EQ(stats(b).device_to_host_bytes, (N / 4) * sizeof(int));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 5;
  EXPECT_TRUE(ok);
  bd.page_size[0] = 0;

  /* Write-back turned off. */
  bd = t_desc1(N, host, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_set_write_back(b, false));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 5;
  EXPECT_TRUE(ok);
  /* set_final_data(NULL) likewise. */
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_set_final_data(b, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 5;
  EXPECT_TRUE(ok);

  /* Creation errors. */
  bd = t_desc1(N, NULL, SYRAH_HOST_WRITE_BACK);
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_NULL_ARGUMENT, "host_pointer");
  bd = t_desc1(N, host, SYRAH_HOST_NONE);
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_INVALID_ARGUMENT, "SYRAH_HOST_NONE");
  bd = t_desc1(N, host, 17);
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_INVALID_ARGUMENT, "ownership 17");
  bd = t_desc1(0, NULL, SYRAH_HOST_NONE);
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_INVALID_ARGUMENT, "empty dimension");
  bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  bd.element_size = 0;
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_INVALID_ARGUMENT, "element size is 0");
  bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  bd.dimensions = 4;
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_INVALID_ARGUMENT, "not 4");
  bd = t_desc1(N, host, SYRAH_HOST_SHARED);
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_NULL_ARGUMENT, "still_shared");
  EXPECT_ERR(syrah_buffer_create(NULL, &b), SYRAH_ERROR_NULL_ARGUMENT, "desc");
  env_close(&e);
  free(host);
  free(other);
}

/* Discard modes transfer nothing for pages they cover; pages they cover
 * only in part are fetched, so the bytes outside the access survive. */
/* A released buffer's device allocation serves the next buffer of the same
 * size on the same device, even while the queue still tracks the released
 * buffer's last kernel; a buffer of another size gets its own. The reused
 * memory carries no data: the new buffer starts from its host data. Large
 * host storage is reused the same way. */
static void test_reuse(const syrah_device *d) {
  env e;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, i, ok, v = 7;
  syrah_buffer *b = NULL, *c = NULL, *other = NULL;
  syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_COPY_IN), od = t_desc1(N / 2, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *ha = NULL;
  void *first = NULL, *second = NULL, *third = NULL;
  {
    /* Large host storage of the default allocator is reused too. */
    syrah_buffer_desc hd = t_desc1(1 << 19, NULL, SYRAH_HOST_NONE);
    int *h1 = NULL, *h2 = NULL;
    REQUIRE_OK(syrah_buffer_create(&hd, &b));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&h1));
    EXPECT_OK(syrah_host_accessor_release(ha));
    EXPECT_OK(syrah_buffer_release(b));
    REQUIRE_OK(syrah_buffer_create(&hd, &b));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&h2));
    EXPECT_TRUE(h1 == h2);
    EXPECT_OK(syrah_host_accessor_release(ha));
    EXPECT_OK(syrah_buffer_release(b));
    b = NULL;
  }
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("reuse of device allocations", "the device has no USM (strategy none)");
    free(host);
    return;
  }
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    return;
  }
  for (i = 0; i < N; ++i) host[i] = i;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, N), N, &v, NULL));
  EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &first));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(b));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(run1(&e, e.twice, acc1(c, SYRAH_ACCESS_READ_WRITE, 0, N), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_get_device_pointer(c, e.q, &second));
  EXPECT_TRUE(first == second);
  EXPECT_OK(syrah_buffer_host_access(c, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 2 * i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  REQUIRE_OK(syrah_buffer_create(&od, &other));
  EXPECT_OK(syrah_buffer_get_device_pointer(other, e.q, &third));
  EXPECT_TRUE(third != second);
  EXPECT_OK(syrah_buffer_release(other));
  EXPECT_OK(syrah_buffer_release(c));
  EXPECT_OK(syrah_queue_wait(e.q));
  env_close(&e);
  free(host);
}

/* Large host storage (which the CUDA back end page-locks) moves exact
 * bytes both ways, also when a released buffer's block serves the next
 * buffer, and kernels see what the host wrote into it. */
static void test_large_host_storage(const syrah_device *d) {
  enum { L = 1 << 19 }; /* 2 MiB of ints */
  env e;
  int v = 5, round, *p = NULL, i, ok;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd = t_desc1(L, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *ha = NULL;
  syrah_buffer_stats st;
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("large host storage", "the device has no USM, which these kernels use");
    return;
  }
  if (!env_open(&e, d, 0)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  for (round = 0; round < 2; ++round, v += 4) {
    REQUIRE_OK(syrah_buffer_create(&bd, &b));
    EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, L), L, &v, NULL));
    EXPECT_TRUE(all_equal(b, L, v));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ_WRITE, NULL, NULL, &ha, (void **)&p));
    if (p)
      for (i = 0; i < L; ++i) p[i] = i - round;
    EXPECT_OK(syrah_host_accessor_release(ha));
    EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, L), L, NULL, NULL));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    for (i = 0, ok = p != NULL; ok && i < L; ++i) ok = p[i] == 2 * (i - round);
    EXPECT_TRUE(ok);
    EXPECT_OK(syrah_host_accessor_release(ha));
    st = stats(b);
    /* Down twice and up once, whole buffer each time. */
    EXPECT_EQ(st.device_to_host_bytes, 2ull * L * sizeof(int));
    EXPECT_EQ(st.host_to_device_bytes, (uint64_t)L * sizeof(int));
    EXPECT_OK(syrah_buffer_release(b));
  }
  EXPECT_OK(syrah_queue_wait(e.q));
  env_close(&e);
}

static void test_partial_discard(const syrah_device *d) {
  env e;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, i, ok, v = -1;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_WRITE_BACK);
  syrah_buffer_stats s;
  syrah_host_accessor *ha = NULL;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    return;
  }
  for (i = 0; i < N; ++i) host[i] = i;
  bd.page_size[0] = N / 4; /* four pages */
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* Elements [N/8, 5N/8): page 1 covered, pages 0 and 2 in part. */
  EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, N / 8, N / 2), N / 2, &v, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 2 * (N / 4) * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 2);
  /* Covering whole pages moves nothing. */
  EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_READ_WRITE, 3 * N / 4, N / 4), N / 4, &v, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 2 * (N / 4) * sizeof(int));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == ((i >= N / 8 && i < 5 * N / 8) || i >= 3 * N / 4 ? -1 : i);
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(b));
  env_close(&e);
  free(host);
}

static bool still_shared_answer = true;
static int still_shared_calls = 0;
static bool still_shared(void *user) {
  ++still_shared_calls;
  return *(bool *)user;
}

typedef struct {
  int allocs, frees, releases;
  bool fail;
} counting;

static void *count_alloc(size_t size, size_t align, void *user) {
  counting *c = (counting *)user;
  void *p = NULL;
  if (c->fail) return NULL;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0) return NULL;
  ++c->allocs;
  return p;
}
static void count_free(void *p, size_t size, void *user) {
  (void)size;
  ++((counting *)user)->frees;
  free(p);
}
static void count_release(void *user) { ++((counting *)user)->releases; }

/* The runtime gives the memory back from its own thread once the last
 * command is done: waits up to 2 s for `*c` to reach `want`. */
static int settled(int *c, int want) {
  struct timespec nap = {0, 1000000};
  int i;
  for (i = 0; i < 2000 && __atomic_load_n(c, __ATOMIC_ACQUIRE) != want; ++i) nanosleep(&nap, NULL);
  return __atomic_load_n(c, __ATOMIC_ACQUIRE);
}

static void test_shared_and_allocators(const syrah_device *d) {
  env e;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, i, ok;
  syrah_buffer *b = NULL, *view = NULL;
  syrah_buffer_desc bd;
  syrah_host_accessor *ha = NULL;
  syrah_allocator alloc;
  counting cnt;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    return;
  }
  /* Shared: the callback decides at release. */
  still_shared_calls = 0;
  for (i = 0; i < N; ++i) host[i] = 1;
  bd = t_desc1(N, host, SYRAH_HOST_SHARED);
  bd.still_shared = still_shared;
  bd.shared_user_data = &still_shared_answer;
  still_shared_answer = true;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_EQ(still_shared_calls, 1);
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 2;
  EXPECT_TRUE(ok);
  still_shared_answer = false;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_EQ(still_shared_calls, 2);
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 2;
  EXPECT_TRUE(ok);

  /* A user allocator serves the host storage and is released last. */
  memset(&cnt, 0, sizeof cnt);
  alloc.allocate = count_alloc;
  alloc.deallocate = count_free;
  alloc.release = count_release;
  alloc.user_data = &cnt;
  bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  bd.allocator = &alloc;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_EQ(cnt.allocs, 0);
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&p));
  EXPECT_EQ(cnt.allocs, 1);
  for (i = 0; i < N; ++i) p[i] = i;
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  /* A view of 16-byte elements over the same storage. */
  {
    size_t r = N / 4;
    EXPECT_OK(syrah_buffer_reinterpret(b, 16, 1, &r, &view));
    r = N;
    EXPECT_ERR(syrah_buffer_reinterpret(b, 16, 1, &r, &view), SYRAH_ERROR_INVALID_ARGUMENT, "bytes");
  }
  EXPECT_OK(syrah_buffer_release(b)); /* the view keeps the storage */
  EXPECT_EQ(cnt.releases, 0);
  EXPECT_OK(syrah_buffer_host_access(view, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 2 * i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(view));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_EQ(settled(&cnt.releases, 1), 1);
  EXPECT_EQ(cnt.allocs, 1);
  EXPECT_EQ(cnt.frees, 1);

  /* An allocator that returns NULL: the operation needing host memory
   * fails, nothing crashes or leaks. */
  memset(&cnt, 0, sizeof cnt);
  cnt.fail = true;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_ERR(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p),
             SYRAH_ERROR_OUT_OF_HOST_MEMORY, "user's allocator returned no memory");
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_EQ(settled(&cnt.releases, 1), 1);
  alloc.allocate = NULL;
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_NULL_ARGUMENT, "allocator->allocate");
  env_close(&e);
  free(host);
}


/* The status of `ev` once it completed, or after 5 s of asking every
 * 10 ms: a command held back by mistake fails the check instead of
 * hanging the test. */
static syrah_event_status status_within_5s(const syrah_event *ev) {
  syrah_event_status st = SYRAH_EVENT_QUEUED;
  int i;
  for (i = 0; i < 500 && ev && st != SYRAH_EVENT_COMPLETE; ++i) {
    EXPECT_OK(syrah_event_get_status(ev, &st));
    if (st != SYRAH_EVENT_COMPLETE) t_sleep_ms(10);
  }
  return st;
}

static void test_dependencies(const syrah_device *d) {
  env e;
  int *p = NULL, i, ok, one = 1;
  syrah_buffer *a = NULL, *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *ha = NULL, *hb = NULL;
  syrah_event *k = NULL, *k2 = NULL;
  syrah_event_status st = 0;
  syrah_accessor accs[2];
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[2];
  if (!env_open(&e, d, 0)) { /* out of order: only dependencies order */
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* a = 1; a *= 2 (x3); b = a + 1: ordered by conflicts alone. */
  EXPECT_OK(run1(&e, e.setv, acc1(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), N, &one, NULL));
  for (i = 0; i < 3; ++i) EXPECT_OK(run1(&e, e.twice, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  accs[0] = acc1(a, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(args);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &hb, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 9;
  EXPECT_TRUE(ok);
  /* Two read host accessors of one buffer coexist. */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  /* A conflicting host accessor while one is held is refused, not a deadlock. */
  EXPECT_ERR(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, NULL, NULL, &ha, (void **)&p),
             SYRAH_ERROR_INVALID_ARGUMENT, "still held");
  /* A kernel writing b waits for the held read accessor; one reading a does not. */
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, &k));
  EXPECT_OK(run1(&e, e.twice, acc1(a, SYRAH_ACCESS_READ, 0, 0), N, NULL, &k2));
  EXPECT_OK(syrah_event_wait(k2));
  t_sleep_ms(50);
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_TRUE(st != SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_host_accessor_release(hb));
  EXPECT_OK(syrah_event_wait(k));
  EXPECT_TRUE(all_equal(b, N, 18));
  syrah_event_release(k);
  syrah_event_release(k2);

  /* update_host brings data home; a later host read moves nothing more. */
  EXPECT_OK(run1(&e, e.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  {
    syrah_buffer_stats before = stats(b);
    EXPECT_OK(syrah_buffer_update_host(b, &k));
    EXPECT_TRUE(k != NULL);
    if (k) {
      EXPECT_OK(syrah_event_wait(k));
      syrah_event_release(k);
    }
    EXPECT_EQ(stats(b).device_to_host_bytes, before.device_to_host_bytes + N * sizeof(int));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    EXPECT_EQ(stats(b).device_to_host_bytes, before.device_to_host_bytes + N * sizeof(int));
    for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 36;
    EXPECT_TRUE(ok);
    EXPECT_OK(syrah_host_accessor_release(ha));
    k = (syrah_event *)&ok;
    EXPECT_OK(syrah_buffer_update_host(b, &k));
    EXPECT_TRUE(k == NULL);
  }
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  env_close(&e);
}

static syrah_status task_read_first(const syrah_host_task_context *ctx, void *user) {
  int *p = NULL;
  syrah_status st = syrah_host_task_get_pointer(ctx, 0, (void **)&p);
  if (st != SYRAH_SUCCESS) return st;
  *(int *)user = p[0];
  return SYRAH_SUCCESS;
}

static syrah_status task_refuse(const syrah_host_task_context *ctx, void *user) {
  (void)ctx;
  (void)user;
  return SYRAH_ERROR_INVALID_ARGUMENT;
}

/* Kernels with accessors and no event asked for, on an in-order queue (which
 * may enqueue them without OpenCL events): other queues, host accessors,
 * host tasks, the write-back at release and failures before them all see
 * them, across more of them than one marker run. */
static void test_without_events(const syrah_device *d) {
  enum { M = 4096 };
  static int home[M];
  env e;
  syrah_queue *q2 = NULL;
  syrah_buffer *a = NULL, *b = NULL, *c = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE), cd = t_desc1(M, home, SYRAH_HOST_WRITE_BACK);
  syrah_host_accessor *ha = NULL;
  syrah_accessor accs[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  syrah_host_task task;
  syrah_event *ev = NULL;
  int *p = NULL, i, ok, zero = 0, seen = -1;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER) || syrah_queue_create(e.ctx, d, 0, NULL, NULL, &q2) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.setv, acc1(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  for (i = 0; i < 200; ++i) EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  /* Another queue reads a after them: b = a + 1 there. */
  accs[0] = acc1(a, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(args);
  EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  EXPECT_TRUE(all_equal(b, M, 201));
  EXPECT_EQ(stats(a).device_to_host_bytes + stats(a).host_to_device_bytes, 0);
  EXPECT_EQ(stats(b).device_to_host_bytes, M * sizeof(int));
  /* A host accessor after more of them: one copy home. */
  for (i = 0; i < 100; ++i) EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  EXPECT_TRUE(all_equal(a, M, 300));
  EXPECT_EQ(stats(a).device_to_host_bytes, M * sizeof(int));
  EXPECT_EQ(stats(a).device_to_host_copies, 1);
  /* A host task on another queue after more of them. */
  for (i = 0; i < 10; ++i) EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  memset(&task, 0, sizeof task);
  task.run = task_read_first;
  task.user_data = &seen;
  accs[0] = acc1(a, SYRAH_ACCESS_READ, 0, 0);
  EXPECT_OK(syrah_queue_submit_host_tasks(q2, accs, 1, &task, 1, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  EXPECT_EQ(seen, 310);
  EXPECT_EQ(stats(a).device_to_host_bytes, 2 * M * sizeof(int));
  /* Releasing a write-back buffer right after them writes their result. */
  memset(home, 0, sizeof home);
  REQUIRE_OK(syrah_buffer_create(&cd, &c));
  for (i = 0; i < 100; ++i) EXPECT_OK(run1(&e, e.inc, acc1(c, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(c));
  for (i = 0, ok = 1; i < M; ++i) ok &= home[i] == 100;
  EXPECT_TRUE(ok);
  /* A command gated by a held host accessor, after some of them, does not
   * hold back another queue's command that waits only for them. */
  {
    syrah_buffer *f = NULL;
    syrah_event *cev = NULL;
    REQUIRE_OK(syrah_buffer_create(&bd, &f));
    for (i = 0; i < 5; ++i) EXPECT_OK(run1(&e, e.inc, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    EXPECT_OK(syrah_buffer_host_access(a, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    accs[0] = acc1(b, SYRAH_ACCESS_READ, 0, 0);
    accs[1] = acc1(f, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
    EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, &cev));
    EXPECT_EQ(status_within_5s(cev), SYRAH_EVENT_COMPLETE);
    EXPECT_OK(syrah_host_accessor_release(ha));
    syrah_event_release(cev);
    EXPECT_TRUE(all_equal(f, M, 207));
    EXPECT_TRUE(all_equal(a, M, 311));
    EXPECT_OK(syrah_buffer_release(f));
  }
  /* A failure before them: the queue's wait reports it once. */
  task.run = task_refuse;
  accs[0] = acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_host_tasks(e.q, accs, 1, &task, 1, NULL, 0, NULL));
  t_sleep_ms(50);
  EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  EXPECT_ERR(syrah_queue_wait(e.q), SYRAH_ERROR_EXECUTION_FAILED, "reported failure");
  /* The kernel after the task fails with it. */
  EXPECT_TRUE(strstr(syrah_last_error_message(), "1 more") != NULL);
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  syrah_queue_release(q2);
  env_close(&e);
}

/* Copies between accessors asked for no event, mixed with launches that
 * also go without: what reads after them, on this queue, another queue or
 * the host, sees their bytes, and the data moves home exactly once. */
static void copies_without_events(const syrah_device *d, syrah_queue_flags flags) {
  enum { M = 4096 };
  env e;
  syrah_queue *q2 = NULL;
  syrah_buffer *a = NULL, *b = NULL, *c = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE);
  syrah_accessor accs[2], wa, wb;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  int i, zero = 0;
  if (!env_open(&e, d, flags) || syrah_queue_create(e.ctx, d, 0, NULL, NULL, &q2) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(run1(&e, e.setv, acc1(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  /* a += 1, b = a, b += 1, a = b: each round adds 2. */
  for (i = 0; i < 50; ++i) {
    EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    wa = acc1(a, SYRAH_ACCESS_READ, 0, 0);
    wb = acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
    EXPECT_OK(syrah_queue_copy_accessor(e.q, &wa, &wb, NULL, 0, NULL));
    EXPECT_OK(run1(&e, e.inc, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    wb.mode = SYRAH_ACCESS_READ;
    wa.mode = SYRAH_ACCESS_DISCARD_WRITE;
    EXPECT_OK(syrah_queue_copy_accessor(e.q, &wb, &wa, NULL, 0, NULL));
  }
  /* Another queue reads b after them: c = b + 1 there. */
  accs[0] = acc1(b, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = acc1(c, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(args);
  EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  EXPECT_TRUE(all_equal(c, M, 101));
  /* The host reads a right after a last copy into it. */
  wb = acc1(b, SYRAH_ACCESS_READ, 0, 0);
  wa = acc1(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_copy_accessor(e.q, &wb, &wa, NULL, 0, NULL));
  EXPECT_TRUE(all_equal(a, M, 100));
  EXPECT_EQ(stats(a).device_to_host_bytes, M * sizeof(int));
  EXPECT_EQ(stats(a).device_to_host_copies, 1);
  EXPECT_EQ(stats(a).host_to_device_bytes, 0);
  EXPECT_EQ(stats(b).device_to_host_bytes + stats(b).host_to_device_bytes, 0);
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_buffer_release(c));
  syrah_queue_release(q2);
  env_close(&e);
}

static void test_copies_without_events(const syrah_device *d) {
  copies_without_events(d, SYRAH_QUEUE_IN_ORDER);
  copies_without_events(d, 0);
}

/* A queue wait may finish a lane of launches without events as a whole:
 * what ran there before the wait is then finished for every later reader,
 * on another queue or the host, and what runs there after it is still
 * waited for. */
static void quiet_work_around_a_queue_wait(const syrah_device *d, syrah_queue_flags flags) {
  enum { M = 4096 };
  env e;
  syrah_queue *q2 = NULL;
  syrah_buffer *a = NULL, *c = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE);
  syrah_accessor accs[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  syrah_event *ev = NULL;
  int i, zero = 0, round;
  if (!env_open(&e, d, flags) || syrah_queue_create(e.ctx, d, 0, NULL, NULL, &q2) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(run1(&e, e.setv, acc1(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  two_accessor_args(args);
  /* Round 0: ten launches, a queue wait, then c = a + 1 on the other
   * queue. Round 1: five more launches and c = a + 1 with no wait between.
   * Round 2: a queue wait with nothing new to wait for, then the same. */
  for (round = 0; round < 3; ++round) {
    int launches = round == 0 ? 10 : round == 1 ? 5 : 0, want;
    for (i = 0; i < launches; ++i)
      EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    if (round != 1) EXPECT_OK(syrah_queue_wait(e.q));
    want = round == 0 ? 11 : 16;
    accs[0] = acc1(a, SYRAH_ACCESS_READ, 0, 0);
    accs[1] = acc1(c, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
    EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, &ev));
    EXPECT_EQ(status_within_5s(ev), SYRAH_EVENT_COMPLETE);
    syrah_event_release(ev);
    ev = NULL;
    EXPECT_TRUE(all_equal(c, M, want));
    EXPECT_TRUE(all_equal(a, M, want - 1));
  }
  /* a comes to the host after rounds 0 and 1 (round 2 finds it current),
   * c after every round; nothing goes the other way. */
  EXPECT_EQ(stats(a).device_to_host_copies, 2);
  EXPECT_EQ(stats(a).device_to_host_bytes, 2 * M * sizeof(int));
  EXPECT_EQ(stats(c).device_to_host_copies, 3);
  EXPECT_EQ(stats(a).host_to_device_bytes + stats(c).host_to_device_bytes, 0);
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_queue_wait(q2));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(c));
  syrah_queue_release(q2);
  env_close(&e);
}

static void test_quiet_work_around_a_queue_wait(const syrah_device *d) {
  quiet_work_around_a_queue_wait(d, SYRAH_QUEUE_IN_ORDER);
  quiet_work_around_a_queue_wait(d, 0);
}

/* On an out-of-order queue: a launch that a held host accessor gates does
 * not hold back a later one of the same queue that follows only launches
 * without events, on whatever lane each went, even when that later one
 * goes without an event itself (it must then not join the gated lane). */
static void test_gate_beside_quiet_launches(const syrah_device *d) {
  enum { M = 4096 };
  env e;
  syrah_buffer *a = NULL, *b = NULL, *f = NULL, *g = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *hb = NULL;
  syrah_accessor accs[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  syrah_event *cev = NULL;
  int *pb = NULL, i, ok, zero = 0;
  if (!env_open(&e, d, 0)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  REQUIRE_OK(syrah_buffer_create(&bd, &f));
  REQUIRE_OK(syrah_buffer_create(&bd, &g));
  EXPECT_OK(run1(&e, e.setv, acc1(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  EXPECT_OK(run1(&e, e.setv, acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  for (i = 0; i < 5; ++i) EXPECT_OK(run1(&e, e.inc, acc1(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  /* The host reads b; b = a + 1, which follows the launches on a, waits
   * for the release (and may go on their lane). */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &hb, (void **)&pb));
  two_accessor_args(args);
  accs[0] = acc1(a, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = acc1(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  /* f = a + 1 needs only the launches on a, and goes without an event: it
   * must not join b's lane, behind the gate. g = f + 1, with an event,
   * shows that f finished. */
  accs[1] = acc1(f, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  accs[0] = acc1(f, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = acc1(g, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, &cev));
  EXPECT_EQ(status_within_5s(cev), SYRAH_EVENT_COMPLETE);
  syrah_event_release(cev);
  for (i = 0, ok = 1; i < M; ++i) ok &= pb[i] == 0;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(hb));
  EXPECT_TRUE(all_equal(f, M, 6));
  EXPECT_TRUE(all_equal(g, M, 7));
  EXPECT_TRUE(all_equal(b, M, 6));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_buffer_release(f));
  EXPECT_OK(syrah_buffer_release(g));
  env_close(&e);
}

/* Pinned host memory: as a buffer's host memory (moved in and out with the
 * exact counts) and as the host side of USM copies; what kind of pointer
 * it is; the errors for bad arguments and a second free. */
static void test_pinned(const syrah_device *d) {
  enum { M = 1 << 14 };
  env e;
  int *pin = NULL, *back = NULL, i, ok;
  void *p = NULL;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_usm_alloc t = 99;
  syrah_buffer_stats st;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  EXPECT_ERR(syrah_malloc_pinned(e.ctx, 0, &p), SYRAH_ERROR_INVALID_ARGUMENT, "size 0");
  EXPECT_ERR(syrah_malloc_pinned(e.ctx, 64, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_pointer");
  EXPECT_ERR(syrah_malloc_pinned(NULL, 64, &p), SYRAH_ERROR_NULL_ARGUMENT, "context");
  REQUIRE_OK(syrah_malloc_pinned(e.ctx, M * sizeof(int), (void **)&pin));
  REQUIRE_OK(syrah_malloc_pinned(e.ctx, M * sizeof(int), (void **)&back));
  EXPECT_OK(syrah_get_pointer_type(e.ctx, pin, &t));
  EXPECT_EQ(t, t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS) ? SYRAH_USM_ALLOC_HOST : SYRAH_USM_ALLOC_UNKNOWN);
  for (i = 0; i < M; ++i) pin[i] = i;
  bd = t_desc1(M, pin, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  for (i = 0; i < 3; ++i) EXPECT_OK(run1(&e, e.inc, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  st = stats(b);
  EXPECT_EQ(st.host_to_device_bytes, M * sizeof(int));
  EXPECT_EQ(st.host_to_device_copies, 1);
  if (t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    void *dev = NULL;
    EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &dev));
    EXPECT_OK(syrah_queue_wait(e.q));
    EXPECT_OK(syrah_queue_memcpy(e.q, back, dev, M * sizeof(int), NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e.q));
    for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == i + 3;
    EXPECT_TRUE(ok);
  } else {
    t_skip("USM copies into pinned memory", "the device has no USM");
  }
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < M; ++i) ok &= pin[i] == i + 3;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_free(e.ctx, pin));
  EXPECT_OK(syrah_free(e.ctx, back));
  EXPECT_ERR(syrah_free(e.ctx, pin), SYRAH_ERROR_INVALID_POINTER, "");
  env_close(&e);
}

/* Two devices: pages move between them, within one context directly and
 * between contexts through the host, exactly as the page bits require. */
/* `b` (N ints) holds host[i] + 1 everywhere. */
static void expect_host_plus_one(syrah_buffer *b, const int *host) {
  syrah_host_accessor *ha = NULL;
  int *p = NULL, ok = 1;
  size_t i;
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0; p && i < N; ++i) ok &= p[i] == host[i] + 1;
  EXPECT_TRUE(p && ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
}

/* Device 1 (`e1`) writes the data of `a` plus one into `dd` while `gate`
 * holds device 2's queue (`e2`) back: that must complete on its own; then
 * the gate opens and device 2's queue finishes. */
static void copy_while_held(env *e1, env *e2, syrah_accessor a, syrah_buffer *dd, syrah_event *gate) {
  syrah_accessor two[2];
  syrah_kernel_arg cargs[2];
  syrah_range rn = syrah_range_1d(N);
  syrah_event *k1 = NULL;
  two[0] = a;
  two[1] = acc1(dd, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(cargs);
  EXPECT_OK(syrah_queue_submit_kernel(e1->q, e1->copyk, &rn, two, 2, cargs, 2, NULL, 0, &k1));
  EXPECT_EQ(status_within_5s(k1), SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_user_event_complete(gate, false));
  EXPECT_OK(syrah_queue_wait(e2->q));
  syrah_event_release(k1);
}

static void two_devices(const syrah_device *d1, const syrah_device *d2, bool one_context) {
  env e1, e2;
  syrah_context *shared = NULL;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, ok;
  size_t i;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_WRITE_BACK);
  syrah_host_accessor *ha = NULL;
  syrah_buffer_stats s;
  const size_t half = N / 2 * sizeof(int);
  t_device = one_context ? "two devices, one context" : "two devices, two contexts";
  printf("== %s\n", t_device);
  if (one_context) {
    const syrah_device *pair[2];
    pair[0] = d1;
    pair[1] = d2;
    REQUIRE_OK(syrah_context_create(pair, 2, &shared));
  }
  if (!env_open_in(&e1, shared, d1, SYRAH_QUEUE_IN_ORDER) || !env_open_in(&e2, shared, d2, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    free(host);
    return;
  }
  for (i = 0; i < N; ++i) host[i] = (int)i;
  bd.page_size[0] = N / 2; /* two pages */
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* Device 1 doubles the first half, device 2 the second: no conflict. */
  EXPECT_OK(run1(&e1, e1.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, N / 2), N / 2, NULL, NULL));
  EXPECT_OK(run1(&e2, e2.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, N / 2, N / 2), N / 2, NULL, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 2 * half);
  EXPECT_EQ(s.host_to_device_copies, 2);
  /* Device 2 then uses everything: the first half comes from device 1. */
  EXPECT_OK(run1(&e2, e2.twice, acc1(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  s = stats(b);
  if (one_context) {
    EXPECT_EQ(s.device_to_device_bytes, half);
    EXPECT_EQ(s.device_to_device_copies, 1);
    EXPECT_EQ(s.host_to_device_bytes, 2 * half);
    EXPECT_EQ(s.device_to_host_bytes, 0);
  } else {
    EXPECT_EQ(s.device_to_device_bytes, 0);
    EXPECT_EQ(s.device_to_host_bytes, half);
    EXPECT_EQ(s.host_to_device_bytes, 3 * half);
  }
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 4 * (int)i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  s = stats(b);
  /* Both pages come home from device 2 in one copy. */
  EXPECT_EQ(s.device_to_host_bytes, (one_context ? 0 : half) + 2 * half);
  EXPECT_EQ(s.device_to_host_copies, (one_context ? 0 : 1) + 1);
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 4 * (int)i;
  EXPECT_TRUE(ok);
  /* Copying pages to device 1 does not wait for a kernel that reads them
   * on device 2 (held back here by a user event). */
  {
    syrah_buffer *c = NULL, *dd = NULL;
    syrah_event *gate = NULL;
    syrah_kernel_arg args[2];
    syrah_range r = syrah_range_1d(1);
    syrah_accessor a = acc1(NULL, SYRAH_ACCESS_READ, 0, 0);
    const syrah_event *deps[1];
    int pitch = 0;
    bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
    REQUIRE_OK(syrah_buffer_create(&bd, &c));
    REQUIRE_OK(syrah_user_event_create(e2.ctx, &gate));
    a.buffer = c;
    args[0].kind = SYRAH_ARG_ACCESSOR;
    args[0].size = 0;
    args[0].value = NULL;
    args[1] = syrah_arg_value(&pitch, sizeof pitch);
    deps[0] = gate;
    EXPECT_OK(syrah_queue_submit_kernel(e2.q, e2.peek, &r, &a, 1, args, 2, deps, 1, NULL));
    {
      /* Device 1 copies the pages it got into dd: they must be the data. */
      syrah_buffer_desc dd_desc = t_desc1(N, NULL, SYRAH_HOST_NONE);
      REQUIRE_OK(syrah_buffer_create(&dd_desc, &dd));
      copy_while_held(&e1, &e2, a, dd, gate);
    }
    /* Within a context device 1 takes the pages from device 2. */
    EXPECT_EQ(stats(c).host_to_device_bytes, (one_context ? 1 : 2) * N * sizeof(int));
    EXPECT_EQ(stats(c).device_to_device_bytes, one_context ? N * sizeof(int) : 0);
    expect_host_plus_one(dd, host);
    syrah_event_release(gate);
    EXPECT_OK(syrah_buffer_release(dd));
    EXPECT_OK(syrah_buffer_release(c));
  }
  /* Between contexts, copying pages from the host to device 1 does not
   * wait for a copy of them from the host to device 2, held back here
   * behind a kernel that waits for a user event on device 2's in-order
   * queue, and device 1's kernel reading them does not wait for it
   * either. */
  if (!one_context) {
    syrah_buffer *c = NULL, *other = NULL, *dd = NULL;
    syrah_event *gate = NULL;
    syrah_kernel_arg args[2];
    syrah_range r = syrah_range_1d(1);
    syrah_accessor a = acc1(NULL, SYRAH_ACCESS_READ, 0, 0);
    syrah_buffer_desc dd_desc = t_desc1(N, NULL, SYRAH_HOST_NONE);
    const syrah_event *deps[1];
    int pitch = 0;
    bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
    REQUIRE_OK(syrah_buffer_create(&bd, &c));
    REQUIRE_OK(syrah_buffer_create(&bd, &other));
    REQUIRE_OK(syrah_buffer_create(&dd_desc, &dd));
    REQUIRE_OK(syrah_user_event_create(e2.ctx, &gate));
    args[0].kind = SYRAH_ARG_ACCESSOR;
    args[0].size = 0;
    args[0].value = NULL;
    args[1] = syrah_arg_value(&pitch, sizeof pitch);
    deps[0] = gate;
    a.buffer = other;
    EXPECT_OK(syrah_queue_submit_kernel(e2.q, e2.peek, &r, &a, 1, args, 2, deps, 1, NULL));
    a.buffer = c;
    EXPECT_OK(syrah_queue_submit_kernel(e2.q, e2.peek, &r, &a, 1, args, 2, NULL, 0, NULL));
    copy_while_held(&e1, &e2, a, dd, gate);
    EXPECT_OK(syrah_queue_wait(e1.q));
    /* Each device got the pages from the host once. */
    EXPECT_EQ(stats(c).host_to_device_bytes, 2 * N * sizeof(int));
    EXPECT_EQ(stats(c).host_to_device_copies, 2);
    EXPECT_EQ(stats(c).device_to_host_bytes, 0);
    expect_host_plus_one(dd, host);
    syrah_event_release(gate);
    EXPECT_OK(syrah_buffer_release(dd));
    EXPECT_OK(syrah_buffer_release(other));
    EXPECT_OK(syrah_buffer_release(c));
  }
  env_close(&e1);
  env_close(&e2);
  if (shared) syrah_context_release(shared);
  free(host);
  t_device = "";
}

static void test_two_devices(void) {
  const syrah_device *all[64];
  size_t n = 0, i, j;
  bool same = false, cross = false;
  syrah_get_devices(all, 64, &n);
  for (i = 0; i < n; ++i) {
    for (j = i + 1; j < n; ++j) {
      uint64_t pi = 0, pj = 0;
      syrah_device_get_info_u64(all[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi);
      syrah_device_get_info_u64(all[j], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pj);
      if (pi == pj && !same) {
        same = true;
        two_devices(all[i], all[j], true);
      }
      if (!cross) {
        cross = true;
        two_devices(all[i], all[j], false);
      }
    }
  }
  if (!same) t_skip("two devices in one context", "no platform with two devices (POCL_DEVICES=\"pthread pthread\" gives two)");
  if (!cross) t_skip("two devices in two contexts", "fewer than two devices");
}

int main(void) {
  t_for_each_device(test_basics);
  t_for_each_device(test_pages);
  t_for_each_device(test_uninitialised_and_ownership);
  t_for_each_device(test_shared_and_allocators);
  t_for_each_device(test_dependencies);
  t_for_each_device(test_partial_discard);
  t_for_each_device(test_reuse);
  t_for_each_device(test_large_host_storage);
  t_for_each_device(test_without_events);
  t_for_each_device(test_copies_without_events);
  t_for_each_device(test_gate_beside_quiet_launches);
  t_for_each_device(test_quiet_work_around_a_queue_wait);
  t_for_each_device(test_pinned);
  test_two_devices();
  return t_finish("test_buffer");
}
