/* Buffers: accessors, page-granular transfers with exact counts, host
 * accessors, host-memory ownership, reuse of released storage and large
 * host storage. */
#define _POSIX_C_SOURCE 200112L
#include "buffer_env.h"

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
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, N * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 1);
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, N * sizeof(int));
  EXPECT_EQ(s.device_to_host_bytes, 0);

  /* The device pointer is stable, and a device USM pointer of the context;
   * a device without USM has none. */
  if (t_buffer_pointers(d)) {
    EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &dp1));
    EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &dp2));
    EXPECT_TRUE(dp1 != NULL && dp1 == dp2);
    EXPECT_OK(syrah_get_pointer_type(e.ctx, dp1, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_DEVICE);
  } else {
    EXPECT_ERR(syrah_buffer_get_device_pointer(b, e.q, &dp1), SYRAH_ERROR_FEATURE_NOT_SUPPORTED,
               t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS) ? "keeps buffers in memory objects" : "has no USM");
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
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 2 * N * sizeof(int));

  /* Discard modes never transfer. */
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), N, &seven, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 2 * N * sizeof(int));

  /* Errors, before anything moves. */
  EXPECT_ERR(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, N - 2, 4), 4, NULL, NULL),
             SYRAH_ERROR_INVALID_ARGUMENT, "does not fit");
  EXPECT_ERR(run1(&e, e.twice, t_window(b, 9, 0, 0), N, NULL, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "unknown access mode 9");
  {
    syrah_accessor a = t_window(b, SYRAH_ACCESS_READ, 0, 0);
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
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 0);
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_EQ(stats(b).device_to_host_bytes, N * sizeof(int)); /* the kernel wrote it */
  /* set_final_data to another pointer. */
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), N, &v, NULL));
  EXPECT_OK(syrah_buffer_set_final_data(b, other));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= other[i] == 3;
  EXPECT_TRUE(ok);

  /* Copy-in: the memory may be reused at once; nothing comes back. */
  for (i = 0; i < N; ++i) host[i] = 10;
  bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  for (i = 0; i < N; ++i) host[i] = 99; /* reused at once */
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
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
      EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
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
    EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, N / 4, N / 4), N / 4, &v, NULL));
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
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_set_write_back(b, false));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 5;
  EXPECT_TRUE(ok);
  /* set_final_data(NULL) likewise. */
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
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
  if (!t_buffer_pointers(d)) {
    t_skip("reuse of device allocations", "buffers on the device are memory objects, without addresses");
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
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, N), N, &v, NULL));
  EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &first));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(b));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(run1(&e, e.twice, t_window(c, SYRAH_ACCESS_READ_WRITE, 0, N), N, NULL, NULL));
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
    EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, L), L, &v, NULL));
    EXPECT_TRUE(all_equal(b, L, v));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ_WRITE, NULL, NULL, &ha, (void **)&p));
    if (p)
      for (i = 0; i < L; ++i) p[i] = i - round;
    EXPECT_OK(syrah_host_accessor_release(ha));
    EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, L), L, NULL, NULL));
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
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, N / 8, N / 2), N / 2, &v, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 2 * (N / 4) * sizeof(int));
  EXPECT_EQ(s.host_to_device_copies, 2);
  /* Covering whole pages moves nothing. */
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_READ_WRITE, 3 * N / 4, N / 4), N / 4, &v, NULL));
  EXPECT_EQ(stats(b).host_to_device_bytes, 2 * (N / 4) * sizeof(int));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == ((i >= N / 8 && i < 5 * N / 8) || i >= 3 * N / 4 ? -1 : i);
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(b));
  env_close(&e);
  free(host);
}

int main(void) {
  t_for_each_device(test_basics);
  t_for_each_device(test_pages);
  t_for_each_device(test_uninitialised_and_ownership);
  t_for_each_device(test_partial_discard);
  t_for_each_device(test_reuse);
  t_for_each_device(test_large_host_storage);
  return t_finish("test_buffer");
}
